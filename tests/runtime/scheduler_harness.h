// Test harness: drives plan_step with a fake "model" step and a real KvBlockAllocator, applying
// each StepPlan the way the engine loop does, and checking the plan's invariants on the way.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "engine/runtime/kv_block_allocator.h"
#include "engine/runtime/scheduler_policy.h"

namespace tandem::runtime::testing {

struct SimSeq {
  SeqId id = 0;
  int64_t prompt = 0;
  int64_t max_tokens = 0;
  int64_t generated = 0;
  int64_t computed = 0;
  bool cancelled = false;
  std::optional<Clock::time_point> deadline;
  int64_t preemptions = 0;
  int64_t max_computed_seen = 0;  // across preemptions: recompute repeats positions
  bool ever_had_kv = false;
  int final_events = 0;
  std::optional<FinishReason> reason;
  int64_t tokens() const { return prompt + generated; }
};

class SchedulerHarness {
 public:
  SchedulerHarness(SchedulerLimits limits, int64_t kv_blocks, int64_t block_tokens = 16)
      : limits_(limits),
        kv_(KvBlockAllocator::create({kv_blocks * block_tokens * 4, block_tokens, 4}).value()) {
    budget_ = {kv_.total_blocks(), kv_.block_tokens()};
    REQUIRE(validate_scheduler_limits(limits_, budget_).ok());
  }

  Status submit(SeqId id, int64_t prompt, int64_t max_tokens,
                std::optional<Clock::time_point> deadline = std::nullopt) {
    TANDEM_RETURN_IF_ERROR(check_request_fits(prompt, max_tokens, 1, limits_, budget_));
    SimSeq seq;
    seq.id = id;
    seq.prompt = prompt;
    seq.max_tokens = max_tokens;
    seq.deadline = deadline;
    seqs_[id] = seq;
    waiting_.push_back(id);
    return Status();
  }

  // One step. `finishes_early(id)` is asked after each sampled token (a stop condition).
  StepPlan step(Clock::time_point now = Clock::time_point{},
                const std::function<bool(SeqId)>& finishes_early = {}) {
    std::vector<RunningSeq> running;
    for (SeqId id : running_) {
      const SimSeq& s = seqs_.at(id);
      RunningSeq& view = running.emplace_back();
      view.id = id;
      view.tokens = s.tokens();
      view.computed_tokens = s.computed;
      view.allocated_blocks = static_cast<int64_t>(kv_.block_table(id).size());
      view.cancelled = s.cancelled || (cancelled_flag_ && cancelled_flag_(id));
      view.deadline = s.deadline;
    }
    std::vector<WaitingSeq> waiting;
    for (SeqId id : waiting_) {
      const SimSeq& s = seqs_.at(id);
      WaitingSeq& view = waiting.emplace_back();
      view.id = id;
      view.tokens = s.tokens();
      view.max_total_tokens = s.prompt + s.max_tokens;
      view.cancelled = s.cancelled || (cancelled_flag_ && cancelled_flag_(id));
      view.deadline = s.deadline;
    }
    SchedulerInput input{&running, &waiting, kv_.free_blocks(), now};
    StepPlan plan = plan_step(input, limits_, budget_);

    // Plan invariants.
    REQUIRE(plan.batch_tokens <= limits_.max_batch_tokens);
    int64_t sum = 0;
    for (const ScheduledWork& w : plan.work) sum += w.num_tokens;
    REQUIRE(sum == plan.batch_tokens);

    for (const DroppedSeq& d : plan.dropped) {
      if (d.was_running) {
        kv_.free_sequence(d.id);
        std::erase(running_, d.id);
      } else {
        REQUIRE_FALSE(kv_.has_sequence(d.id));  // C2/C3: never had KV while waiting
        std::erase(waiting_, d.id);
      }
      finish(d.id, d.reason);
    }
    for (auto it = plan.preempted.rbegin(); it != plan.preempted.rend(); ++it) {
      kv_.free_sequence(*it);
      std::erase(running_, *it);
      SimSeq& s = seqs_.at(*it);
      s.computed = 0;
      ++s.preemptions;
      ++preemptions_;
      waiting_.push_front(*it);
    }
    for (SeqId id : plan.admitted) {
      REQUIRE(!waiting_.empty());
      REQUIRE(waiting_.front() == id);  // admission is a prefix of the queue
      waiting_.pop_front();
      running_.push_back(id);
    }
    REQUIRE(static_cast<int64_t>(running_.size()) <= limits_.max_running);
    const int64_t free_before = kv_.free_blocks();
    for (const ScheduledWork& w : plan.work) {
      SimSeq& s = seqs_.at(w.id);
      REQUIRE(w.start == s.computed);
      REQUIRE(w.num_tokens >= 1);
      REQUIRE(w.start + w.num_tokens <= s.tokens());
      REQUIRE(w.kv_tokens == s.tokens());
      REQUIRE(kv_.grow(w.id, w.kv_tokens).ok());
      s.ever_had_kv = true;
    }
    REQUIRE(free_before - kv_.free_blocks() == plan.blocks_to_allocate);
    REQUIRE(kv_.check_invariants().ok());

    // The fake model: every scheduled sequence advances.
    for (const ScheduledWork& w : plan.work) {
      SimSeq& s = seqs_.at(w.id);
      s.computed += w.num_tokens;
      s.max_computed_seen = std::max(s.max_computed_seen, s.computed);
      if (!w.samples) continue;
      REQUIRE(s.computed == s.tokens());
      ++s.generated;
      if (on_token_) on_token_(w.id);
      if (s.generated == s.max_tokens) {
        end_running(w.id, FinishReason::kLength);
      } else if (finishes_early && finishes_early(w.id)) {
        end_running(w.id, FinishReason::kStop);
      }
    }
    return plan;
  }

  void cancel(SeqId id) { seqs_.at(id).cancelled = true; }
  void set_cancelled_flag(std::function<bool(SeqId)> f) { cancelled_flag_ = std::move(f); }
  void set_on_token(std::function<void(SeqId)> f) { on_token_ = std::move(f); }
  void set_on_finish(std::function<void(SeqId, FinishReason)> f) { on_finish_ = std::move(f); }

  const SimSeq& seq(SeqId id) const { return seqs_.at(id); }
  const std::vector<SeqId>& running() const { return running_; }
  const std::deque<SeqId>& waiting() const { return waiting_; }
  const KvBlockAllocator& kv() const { return kv_; }
  const KvBudget& budget() const { return budget_; }
  int64_t preemptions() const { return preemptions_; }
  bool idle() const { return running_.empty() && waiting_.empty(); }

 private:
  void end_running(SeqId id, FinishReason reason) {
    kv_.free_sequence(id);
    std::erase(running_, id);
    finish(id, reason);
  }
  void finish(SeqId id, FinishReason reason) {
    SimSeq& s = seqs_.at(id);
    ++s.final_events;
    s.reason = reason;
    if (on_finish_) on_finish_(id, reason);
  }

  SchedulerLimits limits_;
  KvBlockAllocator kv_;
  KvBudget budget_;
  std::map<SeqId, SimSeq> seqs_;
  std::deque<SeqId> waiting_;
  std::vector<SeqId> running_;
  int64_t preemptions_ = 0;
  std::function<bool(SeqId)> cancelled_flag_;
  std::function<void(SeqId)> on_token_;
  std::function<void(SeqId, FinishReason)> on_finish_;
};

}  // namespace tandem::runtime::testing
