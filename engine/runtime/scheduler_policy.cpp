// Scheduling policy: submission checks and the per-step plan (see scheduler_policy.h).
#include "engine/runtime/scheduler_policy.h"

#include <algorithm>
#include <limits>
#include <string>

#include "base/check.h"

namespace tandem::runtime {
namespace {

bool expired(const std::optional<Clock::time_point>& deadline, Clock::time_point now) {
  return deadline.has_value() && *deadline <= now;
}

std::string str(int64_t v) {
  return std::to_string(v);
}

}  // namespace

Status validate_scheduler_limits(const SchedulerLimits& limits, const KvBudget& kv) {
  if (limits.max_batch_tokens <= 0) {
    return invalid_argument_error("scheduler: max_batch_tokens must be positive, got " +
                                  str(limits.max_batch_tokens));
  }
  if (limits.prefill_chunk_tokens <= 0) {
    return invalid_argument_error("scheduler: prefill_chunk_tokens must be positive, got " +
                                  str(limits.prefill_chunk_tokens));
  }
  if (limits.max_running <= 0) {
    return invalid_argument_error("scheduler: max_running must be positive, got " +
                                  str(limits.max_running));
  }
  if (limits.context_length <= 0) {
    return invalid_argument_error("scheduler: context_length must be positive, got " +
                                  str(limits.context_length));
  }
  if (limits.prefill_chunk_tokens > limits.max_batch_tokens) {
    return invalid_argument_error(
        "scheduler: prefill_chunk_tokens (" + str(limits.prefill_chunk_tokens) +
        ") exceeds max_batch_tokens (" + str(limits.max_batch_tokens) + ")");
  }
  if (limits.max_batch_tokens < limits.max_running) {
    return invalid_argument_error("scheduler: max_batch_tokens (" + str(limits.max_batch_tokens) +
                                  ") is smaller than max_running (" + str(limits.max_running) +
                                  "); every running sequence must be able to decode each step");
  }
  if (kv.total_blocks <= 0 || kv.block_tokens <= 0) {
    return invalid_argument_error("scheduler: kv total blocks (" + str(kv.total_blocks) +
                                  ") and block tokens (" + str(kv.block_tokens) +
                                  ") must be positive");
  }
  return Status();
}

Status check_request_fits(int64_t prompt_tokens, int64_t max_tokens, int64_t n,
                          const SchedulerLimits& limits, const KvBudget& kv) {
  if (prompt_tokens <= 0) return invalid_argument_error("request: the prompt is empty");
  if (max_tokens < 1) {
    return invalid_argument_error("request: max_tokens must be at least 1, got " + str(max_tokens));
  }
  if (n < 1 || n > limits.max_running) {
    return invalid_argument_error("request: n = " + str(n) + " samples; between 1 and " +
                                  str(limits.max_running) +
                                  " (server.max_running_requests) are served");
  }
  // Both are positive, and the context length bounds the sum before any multiplication. The sum
  // itself may overflow for a hostile max_tokens, so it is only formed when it fits.
  if (prompt_tokens > limits.context_length || max_tokens > limits.context_length ||
      prompt_tokens + max_tokens > limits.context_length) {
    const bool sum_fits = max_tokens <= std::numeric_limits<int64_t>::max() - prompt_tokens;
    return invalid_argument_error(
        "request: prompt (" + str(prompt_tokens) + " tokens) + max_tokens (" + str(max_tokens) +
        ") = " + (sum_fits ? str(prompt_tokens + max_tokens) : "more than 2^63") +
        " exceeds the context length of " + str(limits.context_length) + " tokens");
  }
  const int64_t total = prompt_tokens + max_tokens;
  const int64_t blocks = kv_blocks_for_tokens(total, kv.block_tokens);
  if (blocks > kv.total_blocks) {
    return invalid_argument_error(
        "request: prompt (" + str(prompt_tokens) + " tokens) + max_tokens (" + str(max_tokens) +
        ") needs " + str(blocks) + " KV blocks of " + str(kv.block_tokens) +
        " tokens, but the whole KV budget is " + str(kv.total_blocks) + " blocks (" +
        str(kv.total_blocks * kv.block_tokens) + " tokens)");
  }
  return Status();
}

int64_t resolve_max_tokens(const std::optional<int64_t>& max_tokens, int64_t prompt_tokens,
                           const SchedulerLimits& limits) {
  if (max_tokens.has_value()) return *max_tokens;
  return limits.context_length - prompt_tokens;  // <= 0 when the prompt fills the context
}

Status check_request(const Request& request, const SchedulerLimits& limits, const KvBudget& kv) {
  const auto prompt = static_cast<int64_t>(request.prompt_token_ids.size());
  return check_request_fits(prompt, resolve_max_tokens(request.sampling.max_tokens, prompt, limits),
                            request.n, limits, kv);
}

StepPlan plan_step(const SchedulerInput& input, const SchedulerLimits& limits, const KvBudget& kv) {
  TANDEM_CHECK(input.running != nullptr && input.waiting != nullptr);
  TANDEM_CHECK(kv.block_tokens > 0);
  StepPlan plan;
  int64_t free = input.free_blocks;

  // 1. Drops.
  std::vector<const RunningSeq*> live;
  live.reserve(input.running->size());
  for (const RunningSeq& seq : *input.running) {
    if (seq.cancelled || expired(seq.deadline, input.now)) {
      plan.dropped.push_back(
          {seq.id, seq.cancelled ? FinishReason::kAbort : FinishReason::kDeadline, true});
      free += seq.released();
    } else {
      live.push_back(&seq);
    }
  }
  std::vector<const WaitingSeq*> waiting;
  waiting.reserve(input.waiting->size());
  for (const WaitingSeq& seq : *input.waiting) {
    if (seq.cancelled || expired(seq.deadline, input.now)) {
      plan.dropped.push_back(
          {seq.id, seq.cancelled ? FinishReason::kAbort : FinishReason::kDeadline, false});
    } else if (seq.tokens <= 0 || kv_blocks_for_tokens(std::max(seq.tokens, seq.max_total_tokens),
                                                       kv.block_tokens) > kv.total_blocks) {
      plan.dropped.push_back({seq.id, FinishReason::kError, false});
    } else {
      waiting.push_back(&seq);
    }
  }

  // 2. Decode pass; live[end..] are preempted (popped from the back = most recently admitted).
  int64_t budget = limits.max_batch_tokens;
  size_t end = live.size();
  std::vector<SeqId> preempted_newest_first;
  for (size_t i = 0; i < end && budget > 0; ++i) {
    const RunningSeq& seq = *live[i];
    if (seq.tokens - seq.computed_tokens != 1) continue;
    const int64_t need = std::max<int64_t>(
        0, kv_blocks_for_tokens(seq.tokens, kv.block_tokens) - seq.allocated_blocks);
    while (need > free && end > i) {
      const RunningSeq& victim = *live[--end];
      preempted_newest_first.push_back(victim.id);
      free += victim.released();
    }
    if (end <= i) break;  // the sequence itself was the newest and got preempted
    plan.work.push_back({seq.id, WorkKind::kDecode, seq.computed_tokens, 1, seq.tokens, true});
    free -= need;
    plan.blocks_to_allocate += need;
    budget -= 1;
  }
  plan.preempted.assign(preempted_newest_first.rbegin(), preempted_newest_first.rend());

  // 3. Prefill chunks of running sequences, oldest first.
  for (size_t i = 0; i < end && budget > 0; ++i) {
    const RunningSeq& seq = *live[i];
    const int64_t pending = seq.tokens - seq.computed_tokens;
    if (pending <= 1) continue;
    const int64_t need = std::max<int64_t>(
        0, kv_blocks_for_tokens(seq.tokens, kv.block_tokens) - seq.allocated_blocks);
    if (need > free) continue;  // admission reserves all known tokens, so only a caller's bug
    const int64_t chunk = std::min({pending, limits.prefill_chunk_tokens, budget});
    plan.work.push_back({seq.id, WorkKind::kPrefill, seq.computed_tokens, chunk, seq.tokens,
                         seq.computed_tokens + chunk == seq.tokens});
    free -= need;
    plan.blocks_to_allocate += need;
    budget -= chunk;
  }

  // 4. Admission in queue order, only on a step without preemption.
  if (plan.preempted.empty()) {
    int64_t running = static_cast<int64_t>(end);
    for (const WaitingSeq* seq : waiting) {
      if (running >= limits.max_running || budget <= 0) break;
      const int64_t need =
          seq->admit_blocks.value_or(kv_blocks_for_tokens(seq->tokens, kv.block_tokens));
      if (need > free) break;
      const int64_t start = std::clamp<int64_t>(seq->cached_tokens, 0, seq->tokens - 1);
      const int64_t chunk = std::min({seq->tokens - start, limits.prefill_chunk_tokens, budget});
      plan.admitted.push_back(seq->id);
      plan.work.push_back(
          {seq->id, WorkKind::kPrefill, start, chunk, seq->tokens, start + chunk == seq->tokens});
      free -= need;
      plan.blocks_to_allocate += need;
      budget -= chunk;
      ++running;
    }
  }

  plan.batch_tokens = limits.max_batch_tokens - budget;
  return plan;
}

}  // namespace tandem::runtime
