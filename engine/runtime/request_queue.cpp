// RequestQueue, RequestChannel and RequestHandle: the only locks between callers and the
// scheduler thread.
#include "engine/runtime/request_queue.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace tandem::runtime {
namespace detail {

// State shared by the queue and every channel (a channel may outlive the queue).
struct QueueState {
  std::mutex mu;
  std::condition_variable cv;           // the scheduler waits here
  std::deque<AcceptedRequest> pending;  // guarded by mu
  // Requests accepted whose final event was not pushed yet, by id (for cancel by id).
  std::unordered_map<std::string, std::weak_ptr<RequestChannel>> in_flight;  // guarded by mu
  bool closed = false;                                                       // guarded by mu
  bool wake = false;  // guarded by mu: a cancel happened

  void wake_scheduler() {
    {
      std::lock_guard<std::mutex> lock(mu);
      wake = true;
    }
    cv.notify_all();
  }
};

}  // namespace detail

// --- RequestChannel ---

RequestChannel::RequestChannel(std::string id, std::shared_ptr<detail::QueueState> queue,
                               int64_t samples)
    : id_(std::move(id)),
      queue_(std::move(queue)),
      samples_(samples),
      sample_final_(static_cast<size_t>(samples), false) {
  TANDEM_CHECK(samples >= 1);
}

bool RequestChannel::sample_final_locked(int64_t index) const {
  TANDEM_CHECK(index >= 0 && index < samples_);
  return sample_final_[static_cast<size_t>(index)];
}

bool RequestChannel::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return final_pushed_;
}

void RequestChannel::request_cancel() {
  if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;  // idempotent
  queue_->wake_scheduler();
}

void RequestChannel::push(TokenEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (final_pushed_ || sample_final_locked(event.index)) return;
    if (event.is_final) {
      sample_final_[static_cast<size_t>(event.index)] = true;
      final_pushed_ =
          std::find(sample_final_.begin(), sample_final_.end(), false) == sample_final_.end();
    }
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
  std::lock_guard<std::mutex> lock(listener_mu_);
  if (listener_) listener_();
}

void RequestChannel::set_listener(std::function<void()> listener) {
  std::lock_guard<std::mutex> lock(listener_mu_);
  listener_ = std::move(listener);
}

// --- RequestHandle ---

RequestHandle::RequestHandle(std::shared_ptr<RequestChannel> channel)
    : channel_(std::move(channel)) {}

RequestHandle& RequestHandle::operator=(RequestHandle&& other) noexcept {
  if (this != &other) {
    if (channel_ != nullptr && !final_read_) channel_->request_cancel();
    channel_ = std::move(other.channel_);
    finals_read_ = other.finals_read_;
    final_read_ = other.final_read_;
    other.channel_ = nullptr;
  }
  return *this;
}

RequestHandle::~RequestHandle() {
  if (channel_ != nullptr && !final_read_) channel_->request_cancel();
}

const std::string& RequestHandle::id() const {
  TANDEM_CHECK(channel_ != nullptr);
  return channel_->id();
}

std::optional<TokenEvent> RequestHandle::take_locked() {
  if (channel_->events_.empty()) return std::nullopt;
  TokenEvent event = std::move(channel_->events_.front());
  channel_->events_.pop_front();
  if (event.is_final && ++finals_read_ == channel_->samples()) final_read_ = true;
  return event;
}

std::optional<TokenEvent> RequestHandle::try_next() {
  if (channel_ == nullptr || final_read_) return std::nullopt;
  std::lock_guard<std::mutex> lock(channel_->mu_);
  return take_locked();
}

std::optional<TokenEvent> RequestHandle::next(std::chrono::milliseconds timeout) {
  if (channel_ == nullptr || final_read_) return std::nullopt;
  std::unique_lock<std::mutex> lock(channel_->mu_);
  channel_->cv_.wait_for(lock, timeout, [this] { return !channel_->events_.empty(); });
  return take_locked();
}

void RequestHandle::cancel() {
  if (channel_ != nullptr) channel_->request_cancel();
}

void RequestHandle::set_listener(std::function<void()> listener) {
  TANDEM_CHECK(channel_ != nullptr);
  channel_->set_listener(std::move(listener));
}

// --- RequestQueue ---

RequestQueue::RequestQueue(size_t capacity, Validator validator)
    : capacity_(capacity),
      validator_(std::move(validator)),
      state_(std::make_shared<detail::QueueState>()) {
  TANDEM_CHECK_MSG(capacity >= 1, "request queue capacity must be at least 1");
}

RequestQueue::~RequestQueue() {
  // Undrained requests hold their channel, and a channel holds the shared state: drop them so
  // that the state and the channels do not keep each other alive. Their handles stay valid.
  std::deque<AcceptedRequest> undrained;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    undrained.swap(state_->pending);
  }
}

Result<RequestHandle> RequestQueue::submit(Request request) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->closed) return unavailable_error("engine is shutting down; request not accepted");
  }
  if (validator_) {
    Status status = validator_(request);
    if (!status.ok()) return status;
  }
  if (request.id.empty()) return invalid_argument_error("request: the request id is empty");
  if (request.n < 1) {
    return invalid_argument_error("request: n must be at least 1, got " +
                                  std::to_string(request.n));
  }
  request.arrival_time = Clock::now();
  auto channel = std::make_shared<RequestChannel>(request.id, state_, request.n);
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->closed) return unavailable_error("engine is shutting down; request not accepted");
    if (state_->in_flight.count(request.id) != 0) {
      return already_exists_error("request id '" + request.id + "' is already in flight");
    }
    if (state_->in_flight.size() >= capacity_) {
      return resource_exhausted_error("request queue full: " + std::to_string(capacity_) +
                                      " requests in flight; retry later");
    }
    state_->in_flight.emplace(request.id, channel);
    state_->pending.push_back({std::move(request), channel});
  }
  state_->cv.notify_all();
  return RequestHandle(std::move(channel));
}

std::vector<AcceptedRequest> RequestQueue::drain() {
  std::vector<AcceptedRequest> out;
  std::lock_guard<std::mutex> lock(state_->mu);
  out.reserve(state_->pending.size());
  for (auto& accepted : state_->pending) out.push_back(std::move(accepted));
  state_->pending.clear();
  return out;
}

void RequestQueue::notify() {
  state_->wake_scheduler();
}

bool RequestQueue::wait_for_work(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mu);
  const bool woken = state_->cv.wait_for(
      lock, timeout, [this] { return !state_->pending.empty() || state_->wake || state_->closed; });
  state_->wake = false;
  return woken;
}

void RequestQueue::push_tokens(RequestChannel& channel, std::vector<TokenId> token_ids,
                               std::string text, std::vector<TokenLogprobs> logprobs,
                               int64_t index) {
  TokenEvent event;
  event.index = index;
  event.token_ids = std::move(token_ids);
  event.text = std::move(text);
  event.logprobs = std::move(logprobs);
  event.cached_tokens = channel.cached_tokens_;
  channel.push(std::move(event));
}

void RequestQueue::set_cached_tokens(RequestChannel& channel, int64_t tokens) {
  channel.cached_tokens_ = tokens;
}

void RequestQueue::push_prompt_logprobs(RequestChannel& channel,
                                        std::vector<TokenLogprobs> logprobs) {
  TokenEvent event;
  event.prompt_logprobs = std::move(logprobs);
  channel.push(std::move(event));
}

void RequestQueue::finish(RequestChannel& channel, FinishReason reason, Usage usage, Status error,
                          std::vector<TokenId> last_token_ids, StopMatch matched,
                          std::vector<TokenLogprobs> last_logprobs, int64_t index) {
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(channel.mu_);
    if (channel.final_pushed_ || channel.sample_final_locked(index)) return;
    last = std::count(channel.sample_final_.begin(), channel.sample_final_.end(), false) == 1;
  }
  // Free the id before the last final event becomes visible, so that a caller who reads it and
  // resubmits the same id is never refused.
  if (last) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->in_flight.erase(channel.id());
  }
  TokenEvent event;
  event.index = index;
  event.token_ids = std::move(last_token_ids);
  event.logprobs = std::move(last_logprobs);
  event.cached_tokens = channel.cached_tokens_;
  event.is_final = true;
  event.finish_reason = reason;
  event.usage = usage;
  event.error = std::move(error);
  event.matched = std::move(matched);
  channel.push(std::move(event));
}

bool RequestQueue::cancel(const std::string& id) {
  std::shared_ptr<RequestChannel> channel;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto it = state_->in_flight.find(id);
    if (it == state_->in_flight.end()) return false;
    channel = it->second.lock();
  }
  if (channel == nullptr) return false;
  channel->request_cancel();
  return true;
}

void RequestQueue::close() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->closed = true;
  }
  state_->cv.notify_all();
}

size_t RequestQueue::in_flight() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->in_flight.size();
}

size_t RequestQueue::pending() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->pending.size();
}

}  // namespace tandem::runtime
