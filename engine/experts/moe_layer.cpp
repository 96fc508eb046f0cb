// MoeLayer: split pairs by the ExpertMap, run the shares concurrently, join, combine in slot order.
#include "engine/experts/moe_layer.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "base/check.h"
#include "kernels/cpu/vector_ops.h"

namespace tandem::experts {

ExpertMap ExpertMap::uniform(size_t n_layers, size_t n_experts, uint8_t worker) {
  ExpertMap map;
  map.n_layers_ = n_layers;
  map.n_experts_ = n_experts;
  map.owner_.assign(n_layers * n_experts, worker);
  return map;
}

uint8_t ExpertMap::worker(size_t layer, size_t expert) const {
  TANDEM_CHECK(layer < n_layers_ && expert < n_experts_);
  return owner_[layer * n_experts_ + expert];
}

void ExpertMap::set(size_t layer, size_t expert, uint8_t worker) {
  TANDEM_CHECK(layer < n_layers_ && expert < n_experts_);
  owner_[layer * n_experts_ + expert] = worker;
}

std::span<const uint8_t> ExpertMap::layer(size_t layer) const {
  if (owner_.empty()) return {};
  TANDEM_CHECK(layer < n_layers_);
  return std::span<const uint8_t>(owner_).subspan(layer * n_experts_, n_experts_);
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

// One worker's thread. The caller fills `job`, sets `pending` and notifies; the thread runs the
// job, stores `status` and `seconds` (the job's wall time on this thread), clears `pending` and
// notifies back. Every field but `thread` and `worker` is guarded by `mutex`.
struct MoeLayer::Helper {
  ExpertWorker* worker = nullptr;
  std::thread thread;
  std::mutex mutex;
  std::condition_variable cv;
  bool stop = false;
  bool pending = false;
  ExpertJob job;
  Status status;
  double seconds = 0.0;
};

void MoeLayer::helper_loop(Helper* h) {
  for (;;) {
    ExpertJob job;
    {
      std::unique_lock<std::mutex> lock(h->mutex);
      h->cv.wait(lock, [h] { return h->stop || h->pending; });
      if (h->stop) return;
      job = h->job;
    }
    const Clock::time_point t0 = Clock::now();
    Status status = h->worker->run(job);
    const double seconds = seconds_since(t0);
    {
      std::lock_guard<std::mutex> lock(h->mutex);
      h->status = std::move(status);
      h->seconds = seconds;
      h->pending = false;
    }
    h->cv.notify_all();
  }
}

MoeLayer::MoeLayer(std::vector<ExpertWorker*> workers) : workers_(std::move(workers)) {
  TANDEM_CHECK(!workers_.empty());
  groups_.resize(workers_.size());
  jobs_.resize(workers_.size());
  statuses_.resize(workers_.size());
  worker_seconds_.assign(workers_.size(), 0.0);
  helper_of_.assign(workers_.size(), nullptr);
  for (size_t w = 1; w < workers_.size(); ++w) {
    TANDEM_CHECK(workers_[w] != nullptr);
    const ThreadPool* pool = workers_[w]->thread_pool();
    bool shared = false;
    for (size_t v = 0; v < workers_.size(); ++v) {
      if (v == w) continue;
      shared = shared || workers_[v] == workers_[w] ||
               (pool != nullptr && workers_[v]->thread_pool() == pool);
    }
    if (shared) continue;
    auto helper = std::make_unique<Helper>();
    helper->worker = workers_[w];
    helper->thread = std::thread(&MoeLayer::helper_loop, helper.get());
    helper_of_[w] = helper.get();
    helpers_.push_back(std::move(helper));
  }
}

void MoeLayer::reset_worker_seconds() {
  std::fill(worker_seconds_.begin(), worker_seconds_.end(), 0.0);
}

MoeLayer::~MoeLayer() {
  for (auto& h : helpers_) {
    {
      std::lock_guard<std::mutex> lock(h->mutex);
      h->stop = true;
    }
    h->cv.notify_all();
    h->thread.join();
  }
}

Status MoeLayer::run(size_t layer, size_t n_experts, std::span<const float> input, size_t n_tokens,
                     size_t hidden, const Routing& routing, const ExpertMap& map,
                     std::span<float> out) {
  TANDEM_CHECK(input.size() == n_tokens * hidden && out.size() == n_tokens * hidden);
  TANDEM_CHECK(routing.n_tokens == n_tokens);
  std::span<const uint8_t> owner;
  if (map.n_layers() != 0) {
    if (layer >= map.n_layers() || map.n_experts() != n_experts) {
      return invalid_argument_error(
          "expert map covers " + std::to_string(map.n_layers()) + " layers x " +
          std::to_string(map.n_experts()) + " experts; layer " + std::to_string(layer) +
          " of a model with " + std::to_string(n_experts) + " experts asked");
    }
    owner = map.layer(layer);
    for (uint8_t w : owner) {
      if (w >= workers_.size()) {
        return invalid_argument_error("expert map names worker " + std::to_string(w) +
                                      " but only " + std::to_string(workers_.size()) + " exist");
      }
    }
  }
  const size_t k = routing.k;
  const size_t n_pairs = n_tokens * k;
  if (pair_out_.size() < n_pairs * hidden) pair_out_.resize(n_pairs * hidden);
  std::span<float> pair_out(pair_out_.data(), n_pairs * hidden);
  // Shares: worker w runs iff it owns at least one pair of this call.
  const size_t n_active_workers = owner.empty() ? 1 : workers_.size();
  for (size_t w = 0; w < workers_.size(); ++w) {
    if (w < n_active_workers) {
      group_by_expert(routing, n_experts, owner, static_cast<uint8_t>(w), groups_[w]);
    } else {
      groups_[w].expert_ids.clear();
      groups_[w].pairs.clear();
    }
    ExpertJob& job = jobs_[w];
    job.layer = layer;
    job.input = input;
    job.n_tokens = n_tokens;
    job.hidden = hidden;
    job.k = k;
    job.groups = &groups_[w];
    job.pair_out = pair_out;
  }
  const bool timed = timings_ != nullptr;
  const Clock::time_point t_start = timed ? Clock::now() : Clock::time_point();
  // Start the helper-thread shares.
  for (size_t w = 1; w < workers_.size(); ++w) {
    Helper* h = helper_of_[w];
    if (h == nullptr || groups_[w].expert_ids.empty()) continue;
    {
      std::lock_guard<std::mutex> lock(h->mutex);
      h->job = jobs_[w];
      h->pending = true;
    }
    h->cv.notify_all();
  }
  // Meanwhile: worker 0, then the workers that must not run beside it, on this thread.
  for (Status& s : statuses_) s = Status();
  MoeLayerStats* stats = timed ? &timings_->at(layer, workers_.size()) : nullptr;
  const auto add_seconds = [&](size_t w, double seconds) {
    worker_seconds_[w] += seconds;
    if (stats != nullptr) stats->seconds[w] += seconds;
  };
  for (size_t w = 0; w < workers_.size(); ++w) {
    if ((w > 0 && helper_of_[w] != nullptr) || groups_[w].expert_ids.empty()) continue;
    const Clock::time_point t0 = Clock::now();
    statuses_[w] = workers_[w]->run(jobs_[w]);
    add_seconds(w, seconds_since(t0));
  }
  // Join (always all of them: they write into pair_out).
  for (size_t w = 1; w < workers_.size(); ++w) {
    Helper* h = helper_of_[w];
    if (h == nullptr || groups_[w].expert_ids.empty()) continue;
    std::unique_lock<std::mutex> lock(h->mutex);
    h->cv.wait(lock, [h] { return !h->pending; });
    add_seconds(w, h->seconds);
    statuses_[w] = std::move(h->status);
  }
  if (timed) {
    stats->joined_seconds += seconds_since(t_start);
    stats->calls += 1;
    stats->tokens += n_tokens;
    for (size_t w = 0; w < workers_.size(); ++w) stats->pairs[w] += groups_[w].pairs.size();
  }
  for (Status& s : statuses_) TANDEM_RETURN_IF_ERROR(s);
  std::fill(out.begin(), out.end(), 0.0f);
  for (size_t t = 0; t < n_tokens; ++t) {
    std::span<float> acc = out.subspan(t * hidden, hidden);
    for (size_t s = 0; s < k; ++s) {
      const size_t p = t * k + s;
      kernels::add_scaled(acc, pair_out.subspan(p * hidden, hidden), routing.weights[p]);
    }
  }
  return Status();
}

}  // namespace tandem::experts
