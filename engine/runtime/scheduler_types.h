// Scheduler types: the limits, the per-sequence views and the step plan that the pure scheduling
// policy (scheduler_policy.h) reads and produces.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/runtime/kv_block_allocator.h"
#include "engine/runtime/request.h"

namespace tandem::runtime {

// Configured limits of the engine loop. Validated by validate_scheduler_limits.
struct SchedulerLimits {
  int64_t max_batch_tokens = 2048;     // tokens (decode + prefill) in one forward pass
  int64_t prefill_chunk_tokens = 512;  // most prompt tokens one sequence prefills per step
  int64_t max_running = 64;            // sequences holding KV at once
  int64_t context_length = 4096;       // prompt + generated tokens of one sequence
};

// KV geometry the policy needs; the free count comes with each step's input.
struct KvBudget {
  int64_t total_blocks = 0;
  int64_t block_tokens = 16;
};

// A sequence waiting for admission: new, or preempted and to be recomputed. Its KV holds
// nothing. `tokens` is what must be prefilled: the prompt, plus the tokens generated before a
// preemption (recompute).
struct WaitingSeq {
  SeqId id = 0;
  int64_t tokens = 0;
  int64_t max_total_tokens = 0;  // prompt + max_tokens: the most KV the sequence can ever need
  bool cancelled = false;
  std::optional<Clock::time_point> deadline;
  // Leading tokens whose KV the prefix cache holds (< tokens): admission starts the prefill there.
  int64_t cached_tokens = 0;
  // Free blocks admission takes (new blocks, copies and unreferenced cached blocks adopted); unset:
  // every block of `tokens` is new.
  std::optional<int64_t> admit_blocks;
};

// A running sequence: admitted, its KV blocks cover `allocated_blocks`. `tokens` = prompt +
// generated so far; `computed_tokens` of them have KV. tokens - computed_tokens == 1 is decode
// (feed the last sampled token); more is prefill (first pass or recompute).
struct RunningSeq {
  SeqId id = 0;
  int64_t tokens = 0;
  int64_t computed_tokens = 0;
  int64_t allocated_blocks = 0;
  bool cancelled = false;
  std::optional<Clock::time_point> deadline;
  // Blocks that become free when the sequence lets go of them (those it alone holds); unset: all
  // of allocated_blocks. Blocks shared with other sequences (a cached prefix two requests use)
  // stay taken, so dropping or preempting the sequence frees only these.
  std::optional<int64_t> releasable_blocks;

  int64_t released() const { return releasable_blocks.value_or(allocated_blocks); }
};

// One step's input. `running` is in admission order (oldest first), `waiting` in queue order
// (front first; preempted sequences are put back at the front).
struct SchedulerInput {
  const std::vector<RunningSeq>* running = nullptr;
  const std::vector<WaitingSeq>* waiting = nullptr;
  int64_t free_blocks = 0;
  Clock::time_point now{};
};

enum class WorkKind { kDecode, kPrefill };

// One sequence's share of the step's forward pass: positions [start, start + num_tokens). Before
// the pass its KV must cover kv_tokens tokens (KvBlockAllocator::grow(id, kv_tokens)).
// `samples` is true when the chunk ends at the last known token, so its logits give a new token.
struct ScheduledWork {
  SeqId id = 0;
  WorkKind kind = WorkKind::kDecode;
  int64_t start = 0;
  int64_t num_tokens = 0;
  int64_t kv_tokens = 0;
  bool samples = false;
};

// A sequence that leaves at this step without finishing normally.
struct DroppedSeq {
  SeqId id = 0;
  FinishReason reason = FinishReason::kAbort;  // kAbort (cancelled) or kDeadline
  bool was_running = false;                    // true: free its KV blocks
};

// The plan for one step, applied in this order: free the KV of `dropped` (running ones) and
// `preempted`; move `preempted` to the front of the waiting queue in the given order; move
// `admitted` (a prefix of waiting, in order) to the back of running; grow KV and run `work`.
struct StepPlan {
  std::vector<DroppedSeq> dropped;
  std::vector<SeqId> preempted;     // front-of-queue order (oldest admitted first)
  std::vector<SeqId> admitted;      // in admission order
  std::vector<ScheduledWork> work;  // decodes first, then prefill chunks
  int64_t batch_tokens = 0;         // sum of work[i].num_tokens
  int64_t blocks_to_allocate = 0;   // new blocks the work takes after the frees
};

}  // namespace tandem::runtime
