// Scheduling policy: pure functions that check a request against the limits at submission and
// plan one continuous-batching step (drop, preempt, decode, chunked prefill, admit).
#pragma once

#include <cstdint>
#include <optional>

#include "base/status.h"
#include "engine/runtime/scheduler_types.h"

namespace tandem::runtime {

// INVALID_ARGUMENT naming the field when a limit is non-positive, the chunk exceeds the batch
// budget, or the batch budget is smaller than max_running (every running sequence must be able to
// decode in one step).
Status validate_scheduler_limits(const SchedulerLimits& limits, const KvBudget& kv);

// The submission check (B4, B5, B6, C9). INVALID_ARGUMENT, with the limit and the actual values in
// the message, when: the prompt is empty; max_tokens < 1; n is not in 1 .. max_running; prompt +
// max_tokens exceeds the context length; or prompt + max_tokens needs more KV blocks than the
// whole budget. A sequence that passes always fits once it runs alone, so it can be preempted but
// never starved for KV. The n samples of a request are n sequences sharing the prompt's blocks
// (KvBlockAllocator::fork); each is planned, preempted and recomputed on its own, so the same
// holds for each of them.
Status check_request_fits(int64_t prompt_tokens, int64_t max_tokens, int64_t n,
                          const SchedulerLimits& limits, const KvBudget& kv);

// max_tokens as the scheduler uses it: the request's own, or (unset) the rest of the context.
int64_t resolve_max_tokens(const std::optional<int64_t>& max_tokens, int64_t prompt_tokens,
                           const SchedulerLimits& limits);

// check_request_fits for a whole request (prompt length, resolved max_tokens, n).
Status check_request(const Request& request, const SchedulerLimits& limits, const KvBudget& kv);

// Plans one step. Pure: reads only its arguments. The rules, in order:
//  1. Cancelled sequences (running or waiting) are dropped with kAbort, expired ones (deadline <=
//     now) with kDeadline; running ones give their blocks back. Waiting ones never had KV (C2/C3).
//     A waiting sequence whose max_total_tokens needs more blocks than the whole budget (a bug at
//     submission) is dropped with kError rather than blocking the queue forever.
//  2. Decode first: each running sequence with exactly one pending token gets 1 token, oldest
//     admitted first, while the batch budget lasts. When its next block is not free, the most
//     recently admitted running sequence is preempted (its blocks freed, it goes back to the front
//     of the waiting queue with its generated tokens, to be recomputed) until the block fits; if
//     the victim is the sequence itself, it is preempted and the pass ends.
//  3. Prefill chunks of running sequences that are still prefilling, oldest first:
//     min(pending, prefill_chunk_tokens, budget left) tokens each. Their KV was reserved at
//     admission for all known tokens, so chunks never allocate.
//  4. Admission, strictly in queue order, and only when nothing was preempted this step: the
//     front sequence is admitted while fewer than max_running sequences run, budget is left and
//     its whole prefill fits in the free blocks (admit_blocks when given: a cached prefix needs
//     fewer); its first chunk is scheduled, starting after its cached tokens. The first that does
//     not fit stops admission (no overtaking, so nothing starves).
StepPlan plan_step(const SchedulerInput& input, const SchedulerLimits& limits, const KvBudget& kv);

}  // namespace tandem::runtime
