// Scheduler: the engine loop — one thread that drains the request queue, plans each
// continuous-batching step (plan_step), runs one forward pass over the whole batch, samples, checks
// stop conditions and streams token events.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "engine/runtime/kv_block_allocator.h"
#include "engine/runtime/kv_event_log.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/paged_kv_cache.h"
#include "engine/runtime/request_queue.h"
#include "engine/runtime/routing_observer.h"
#include "engine/runtime/scheduler_types.h"

namespace tandem::tokenizer {
class Tokenizer;
}  // namespace tandem::tokenizer

namespace tandem::runtime {

struct SchedulerOptions {
  SchedulerLimits limits;
  // KV budget. kv_blocks > 0 sets the block count directly; otherwise kv_budget_bytes (0: enough
  // for max_running sequences of context_length tokens).
  int64_t kv_blocks = 0;
  int64_t kv_budget_bytes = 0;
  int64_t kv_block_tokens = 16;
  // Automatic prefix caching: full KV blocks stay cached after their sequence ends and a new
  // request reuses the longest cached prefix of its tokens (KvBlockAllocator). Off for a model with
  // sliding-window layers (their per-sequence rings cannot be restored from the pool).
  bool prefix_caching = true;
  // Requests in flight (accepted, final event not yet pushed); submit beyond it fails
  // RESOURCE_EXHAUSTED.
  size_t queue_capacity = 256;
  // Tokens that end a sequence (unless ignore_eos); empty: the model's EOS id if it has one.
  std::vector<int32_t> eos_token_ids;
  // Optional, non-owning, must outlive the scheduler. With it, token events carry detokenized
  // text and stop strings work; without it, text is empty and requests with stop strings are
  // rejected at submission.
  const tokenizer::Tokenizer* tokenizer = nullptr;
  // Optional, non-owning, must outlive the scheduler: told about every forward pass's routing
  // (the forward then records it, a copy of n_tokens * k ids and weights per MoE layer).
  RoutingObserver* routing_observer = nullptr;
  // Optional: called on the scheduler thread after every forward pass, before its results are
  // used (e.g. check_checkpoint_files: the model file may have changed under the mapping). An
  // error discards the pass and fails the scheduler with it (fail()).
  std::function<Status()> weights_check;
  // Test seam: called on the scheduler thread after each forward pass's events were pushed, with
  // the number of forward passes so far. Blocking in it pauses the loop. Empty: nothing.
  std::function<void(int64_t)> after_step;
};

// The loop's load, published after every loop iteration. A plain value.
struct SchedulerLoad {
  int64_t running = 0;  // sequences holding KV
  int64_t waiting = 0;  // accepted, not running (new or preempted)
  int64_t kv_used_blocks = 0;
  int64_t kv_total_blocks = 0;
  int64_t kv_block_tokens = 0;  // positions per block
  int64_t steps = 0;            // forward passes so far
  int64_t preemptions = 0;      // sequences preempted so far
  int64_t kv_cached_blocks =
      0;  // blocks no sequence holds, kept by the prefix cache (counted free)
  int64_t kv_evicted_blocks = 0;  // cached blocks evicted to make room so far
  // Prompt tokens of admitted requests, and of them the ones the prefix cache served (first
  // admission only), so far.
  int64_t prefix_query_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  // Tokens the waiting sequences must still prefill: the first max_running of them net of their
  // cached prefix (as of the latest step), the rest in full.
  int64_t waiting_uncached_tokens = 0;
  // When the loop last finished an iteration (idle waits included): a loop that stops advancing
  // this while it has work is wedged (liveness, hardening row C13).
  Clock::time_point heartbeat{};
};

// What drop_prefix_cache did: cached blocks forgotten, and cached blocks left because running
// sequences hold them.
struct PrefixCacheDrop {
  int64_t dropped_blocks = 0;
  int64_t held_blocks = 0;
};

enum class StopMode {
  kDrain,  // finish every accepted request normally, then stop
  kAbort,  // end every accepted request with a final kAbort event at once
};

// The bytes of a KV budget that the sliding-window layers' per-sequence rings take: one ring per
// running sequence (max(max_running, 1)), each sized for prefill chunks of prefill_chunk_tokens;
// 0 for a model without windows. Scheduler::create takes them out of kv_budget_bytes before it
// sizes the pool; the GPU memory plan guesses that pool the same way.
int64_t window_rings_budget_bytes(const KvLayerLayout& layout, size_t kv_dim,
                                  const SchedulerLimits& limits);

// The window rings a device dense executor keeps beside a scheduler's pool of `block_tokens`
// positions per block (DeviceWindowRings): one per running sequence (max(max_running, 1)), for
// passes of up to prefill_chunk_tokens tokens of a sequence; none for a model without windows.
DeviceWindowRings device_window_rings(const KvLayerLayout& layout, const SchedulerLimits& limits,
                                      size_t block_tokens);

// KV memory is paged: create() allocates one KvPool holding every block of the budget (block_tokens
// positions x kv_dim floats, K and V, per layer) and never allocates KV memory again. The
// KvBlockAllocator owns the block bookkeeping and decides admission and preemption; each running
// sequence's PagedKvCache (created at admission with max_positions = prompt + max_tokens) is a view
// into the pool through its block table, and attention reads K/V through that table. A finished or
// preempted sequence's blocks return to the allocator's free list for reuse.
//
// Threads: submit and the counters from any thread; create/start/stop/running and the
// destructor from the thread that owns the Scheduler (never the scheduler thread). The ModelRunner,
// the allocator and every sequence's state are touched only by the scheduler thread; callers talk
// to it through the RequestQueue only. Every request that submit() accepts gets exactly one final
// event, including across stop().
class Scheduler {
 public:
  // Takes the runner (whose weights must outlive the scheduler). INVALID_ARGUMENT for limits that
  // validate_scheduler_limits rejects, a context_length beyond the runner's, or a KV budget that
  // holds no block.
  static Result<std::unique_ptr<Scheduler>> create(std::unique_ptr<ModelRunner> runner,
                                                   SchedulerOptions options);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;
  // stop(StopMode::kAbort) if still running.
  ~Scheduler();

  // Starts the loop thread. FAILED_PRECONDITION if already started (a scheduler runs once).
  Status start();
  // Closes submission (later submits fail UNAVAILABLE), then drains or aborts, and joins the
  // thread. Idempotent; a no-op when never started (requests accepted before start are then
  // ended with kAbort).
  void stop(StopMode mode = StopMode::kDrain);
  bool running() const { return thread_.joinable(); }

  // Any thread. Validates (sampling params against the vocabulary, token ids, check_request
  // against the limits and the KV budget, stop strings need a tokenizer) and enqueues; errors as
  // RequestQueue::submit. Accepted before start() is fine: the loop picks it up when it runs.
  Result<RequestHandle> submit(Request request);

  // Any thread: later submits fail UNAVAILABLE; accepted requests keep running. For a drain with a
  // grace period: close_admission(), wait for in_flight() to reach 0 or the grace to pass, then
  // stop(StopMode::kAbort).
  void close_admission();
  // Any thread: cancels the in-flight request `id` (RequestQueue::cancel). False when no such
  // request is in flight.
  bool cancel(const std::string& id);
  // Any thread: requests accepted and not yet finished.
  size_t in_flight() const;
  // Any thread: the scheduler stops serving for good: every accepted request ends with
  // `reason` (an error) at the loop's next iteration, and later submits fail UNAVAILABLE with
  // its message. The first reason is kept. The loop keeps running (idle) until stop().
  void fail(Status reason);
  // Any thread: what the prefix cache did, in numbered batches (published after every step that
  // changed it; closed by stop()). Empty without prefix caching.
  KvEventLog& kv_events() { return kv_events_; }
  // Any thread: the reason given to fail() (or by weights_check), OK while serving.
  Status failure() const;
  // Any thread: the latest published load.
  SchedulerLoad load() const;
  // Any thread (FlushCache): forgets every cached KV block no running sequence holds, on the loop
  // thread at its next iteration (after the forward pass in progress), and waits for it up to
  // `wait`. Later requests find nothing of what was dropped. FAILED_PRECONDITION when the loop is
  // not running or the prefix cache is off; DEADLINE_EXCEEDED when the loop did not get to it
  // within `wait` (it still will).
  Result<PrefixCacheDrop> drop_prefix_cache(std::chrono::milliseconds wait);

  // Block counts of the KV budget. Read them only while the loop is not running (before start or
  // after stop).
  int64_t kv_total_blocks() const { return allocator_.total_blocks(); }
  int64_t kv_free_blocks() const { return allocator_.free_blocks(); }
  Status kv_check_invariants() const { return allocator_.check_invariants(); }
  // Whether the prefix cache is on (the option, unless the model has sliding-window layers).
  bool prefix_caching() const { return allocator_.prefix_caching(); }
  // Bytes of the KV pool (allocated once at create, the whole budget in whole blocks). Any thread.
  size_t kv_pool_bytes() const { return pool_->bytes(); }
  // Forward passes run so far (steps with work). Any thread.
  int64_t steps() const { return steps_.load(std::memory_order_relaxed); }
  // Sequences preempted (KV freed, to be recomputed) so far. Any thread.
  int64_t preemptions() const { return preemptions_.load(std::memory_order_relaxed); }
  const SchedulerLimits& limits() const { return options_.limits; }
  // Set-up access to the runner and the KV pool (e.g. enable_cuda_dense installing a dense
  // executor that mirrors the pool). Only from the owning thread while the loop is not running
  // (before start() or after stop()); the scheduler keeps ownership.
  ModelRunner& runner() { return *runner_; }
  KvPool& kv_pool() { return *pool_; }

 private:
  struct Sequence;
  class Loop;

  Scheduler(std::unique_ptr<ModelRunner> runner, SchedulerOptions options,
            KvBlockAllocator allocator, std::unique_ptr<KvPool> pool);
  Status validate(const Request& request) const;

  std::unique_ptr<ModelRunner> runner_;
  SchedulerOptions options_;
  KvBudget budget_;
  KvBlockAllocator allocator_;
  std::unique_ptr<KvPool> pool_;  // declared before loop_: the sequences' caches point into it
  KvEventLog kv_events_;
  std::unique_ptr<RequestQueue> queue_;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
  bool started_ = false;
  std::atomic<bool> stop_requested_{false};
  std::atomic<int> stop_mode_{0};
  std::atomic<int64_t> steps_{0};
  std::atomic<int64_t> preemptions_{0};
  std::atomic<int64_t> load_running_{0};
  std::atomic<int64_t> load_waiting_{0};
  std::atomic<int64_t> load_kv_used_{0};
  std::atomic<int64_t> load_kv_cached_{0};
  std::atomic<int64_t> load_kv_evicted_{0};
  std::atomic<int64_t> load_waiting_uncached_{0};
  std::atomic<int64_t> prefix_query_tokens_{0};
  std::atomic<int64_t> prefix_hit_tokens_{0};
  std::atomic<int64_t> heartbeat_ns_{0};  // Clock::time_point since epoch, in ns
  std::atomic<bool> failed_{false};
  // drop_prefix_cache hand-off: requests are numbered; the loop answers the latest.
  std::atomic<bool> loop_started_{false};
  std::atomic<bool> drop_pending_{false};
  std::mutex drop_mu_;
  std::condition_variable drop_cv_;
  int64_t drop_requested_ = 0;   // guarded by drop_mu_
  int64_t drop_answered_ = 0;    // guarded by drop_mu_
  PrefixCacheDrop drop_result_;  // guarded by drop_mu_
  mutable std::mutex failure_mu_;
  Status failure_;  // guarded by failure_mu_; set once
};

}  // namespace tandem::runtime
