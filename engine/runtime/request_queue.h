// RequestQueue: all cross-thread hand-off between callers and the scheduler thread — bounded
// submission, per-request event channels, cancellation flags — and the caller's RequestHandle.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "engine/runtime/request.h"

namespace tandem::runtime {

namespace detail {
struct QueueState;
}  // namespace detail

// The event stream and cancel flag of one accepted request, shared by its RequestHandle (the
// reader) and the scheduler (the writer, through RequestQueue). Thread-safe; created only by
// RequestQueue::submit.
class RequestChannel {
 public:
  // `samples`: the request's n (>= 1); the channel is finished once each has its final event.
  RequestChannel(std::string id, std::shared_ptr<detail::QueueState> queue, int64_t samples = 1);
  RequestChannel(const RequestChannel&) = delete;
  RequestChannel& operator=(const RequestChannel&) = delete;

  const std::string& id() const { return id_; }
  int64_t samples() const { return samples_; }
  // Any thread; the scheduler polls it every step.
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // True once every sample's final event was pushed.
  bool finished() const;

 private:
  friend class RequestQueue;
  friend class RequestHandle;

  void request_cancel();
  void push(TokenEvent event);
  void set_listener(std::function<void()> listener);

  // Under mu_: whether `index`'s final event was pushed (a bug for an index out of range).
  bool sample_final_locked(int64_t index) const;

  const std::string id_;
  const std::shared_ptr<detail::QueueState> queue_;  // to wake the scheduler on cancel
  const int64_t samples_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TokenEvent> events_;   // guarded by mu_
  bool final_pushed_ = false;       // guarded by mu_: every sample's final event
  std::vector<bool> sample_final_;  // guarded by mu_: per sample
  int64_t cached_tokens_ = 0;       // scheduler thread only (RequestQueue::set_cached_tokens)
  std::mutex listener_mu_;          // held while the listener runs and while it is replaced
  std::function<void()> listener_;  // guarded by listener_mu_
};

// The caller's end of one request: reads its events and cancels it. Move-only. Methods may be
// called from any thread, but one handle is meant for one reader. Dropping a handle before its
// final event was read cancels the request (a client that went away, C3-C5).
class RequestHandle {
 public:
  RequestHandle() = default;
  explicit RequestHandle(std::shared_ptr<RequestChannel> channel);
  RequestHandle(RequestHandle&&) noexcept = default;
  RequestHandle& operator=(RequestHandle&& other) noexcept;
  RequestHandle(const RequestHandle&) = delete;
  RequestHandle& operator=(const RequestHandle&) = delete;
  ~RequestHandle();

  bool valid() const { return channel_ != nullptr; }
  const std::string& id() const;

  // The next event if one is ready, else nothing. Never blocks.
  std::optional<TokenEvent> try_next();
  // Waits up to `timeout` for the next event; nothing on timeout or after the final event was
  // read.
  std::optional<TokenEvent> next(std::chrono::milliseconds timeout);
  // Asks the scheduler to stop the request; it ends with a final kAbort event at the next step
  // (unless it already finished). Thread-safe and idempotent.
  void cancel();
  // True once every sample's final event has been read through this handle.
  bool done() const { return final_read_; }
  // Installs a callback run after every event pushed from now on (on the pushing thread, usually
  // the scheduler's; outside the event lock, so it may call try_next()), for readers that are
  // woken rather than blocking in next(). It must be quick and must not call set_listener.
  // Replacing it (set_listener({}) to remove) waits for a running call to return, so that after
  // it returns the old callback never runs again. Requires valid().
  void set_listener(std::function<void()> listener);

 private:
  std::optional<TokenEvent> take_locked();

  std::shared_ptr<RequestChannel> channel_;
  int64_t finals_read_ = 0;
  bool final_read_ = false;
};

// A request accepted by submit, as the scheduler thread receives it from drain().
struct AcceptedRequest {
  Request request;
  std::shared_ptr<RequestChannel> channel;
};

// Owned by the engine; shared by every submitting thread and the one scheduler thread.
// Capacity bounds the requests in flight (accepted, final event not yet pushed), so neither the
// hand-off nor the scheduler's own waiting list can grow without bound.
class RequestQueue {
 public:
  // Run by submit on the submitting thread before a request takes a slot; a non-OK status
  // rejects it (e.g. check_request against the scheduler limits). May be empty.
  using Validator = std::function<Status(const Request&)>;

  // capacity >= 1 (a bug otherwise).
  explicit RequestQueue(size_t capacity, Validator validator = {});
  RequestQueue(const RequestQueue&) = delete;
  RequestQueue& operator=(const RequestQueue&) = delete;
  ~RequestQueue();

  // Any thread. Stamps arrival_time. Errors, checked in this order: UNAVAILABLE after close();
  // the validator's error; INVALID_ARGUMENT for an empty id; ALREADY_EXISTS when a request with
  // the same id is in flight; RESOURCE_EXHAUSTED when `capacity` requests are in flight. Never
  // blocks on the scheduler.
  Result<RequestHandle> submit(Request request);

  // Scheduler thread: takes every request submitted since the last call, in submission order.
  std::vector<AcceptedRequest> drain();
  // Scheduler thread, when it has nothing to run: waits up to `timeout` for a submission, a
  // cancellation or close(). Returns true when woken by one of them.
  bool wait_for_work(std::chrono::milliseconds timeout);

  // Scheduler thread: appends new tokens of sample `index` to the request's stream. Ignored after
  // that sample's final event. `logprobs`: one per token id when the request asked for them.
  void push_tokens(RequestChannel& channel, std::vector<TokenId> token_ids, std::string text = {},
                   std::vector<TokenLogprobs> logprobs = {}, int64_t index = 0);
  // Scheduler thread: the prompt tokens the prefix cache served, carried by every later token
  // event (TokenEvent::cached_tokens).
  void set_cached_tokens(RequestChannel& channel, int64_t tokens);
  // Scheduler thread: the prompt's logprobs (TokenEvent::prompt_logprobs), in an event of their
  // own.
  void push_prompt_logprobs(RequestChannel& channel, std::vector<TokenLogprobs> logprobs);
  // Scheduler thread: pushes sample `index`'s final event (once; later calls are ignored); with
  // the last sample's, frees the request's id and slot. `error` is the status for
  // kError/kDeadline events (OK otherwise).
  void finish(RequestChannel& channel, FinishReason reason, Usage usage, Status error = Status(),
              std::vector<TokenId> last_token_ids = {}, StopMatch matched = {},
              std::vector<TokenLogprobs> last_logprobs = {}, int64_t index = 0);

  // Any thread: cancels the in-flight request `id` as RequestHandle::cancel does (it ends with a
  // final kAbort event at the scheduler's next step). False when no such request is in flight
  // (unknown or already finished), which callers treat as success (aborting is idempotent).
  bool cancel(const std::string& id);

  // Any thread: ends the scheduler's current wait_for_work early (it has something to do).
  void notify();

  // Any thread: later submissions fail with UNAVAILABLE; wakes the scheduler. Requests already
  // accepted stay in flight until the scheduler finishes them.
  void close();

  // Any thread.
  size_t capacity() const { return capacity_; }
  size_t in_flight() const;
  size_t pending() const;  // submitted, not yet drained

 private:
  const size_t capacity_;
  const Validator validator_;
  const std::shared_ptr<detail::QueueState> state_;
};

}  // namespace tandem::runtime
