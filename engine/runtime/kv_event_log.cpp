// KvEventLog: numbered batches of prefix-cache events, kept for readers, with wake-up listeners.
#include "engine/runtime/kv_event_log.h"

#include <chrono>
#include <utility>

#include "base/check.h"

namespace tandem::runtime {

KvEventLog::KvEventLog(size_t capacity) : capacity_(capacity) {
  TANDEM_CHECK(capacity >= 1);
}

void KvEventLog::publish(std::vector<KvEvent> events) {
  if (events.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    KvEventBatch batch;
    batch.sequence_number = ++last_;
    batch.timestamp =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    batch.events = std::move(events);
    batches_.push_back(std::move(batch));
    while (batches_.size() > capacity_) batches_.pop_front();
  }
  notify();
}

std::vector<KvEventBatch> KvEventLog::since(uint64_t after, size_t max, bool* lost) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<KvEventBatch> out;
  if (lost != nullptr) {
    *lost = !batches_.empty() && batches_.front().sequence_number > after + 1;
  }
  for (const KvEventBatch& batch : batches_) {
    if (out.size() >= max) break;
    if (batch.sequence_number > after) out.push_back(batch);
  }
  return out;
}

uint64_t KvEventLog::last() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}

void KvEventLog::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
  }
  notify();
}

bool KvEventLog::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

uint64_t KvEventLog::add_listener(Listener listener) {
  std::lock_guard<std::mutex> lock(listeners_mu_);
  const uint64_t id = next_listener_++;
  listeners_.emplace(id, std::move(listener));
  return id;
}

void KvEventLog::remove_listener(uint64_t id) {
  std::lock_guard<std::mutex> lock(listeners_mu_);
  listeners_.erase(id);
}

void KvEventLog::notify() {
  std::lock_guard<std::mutex> lock(listeners_mu_);
  for (auto& [id, listener] : listeners_) listener();
}

}  // namespace tandem::runtime
