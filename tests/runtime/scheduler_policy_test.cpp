// Tests of the pure scheduling policy: admission, token budget and chunking, decode-first,
// preemption and recompute, rejection, cancellation and deadlines.
#include "engine/runtime/scheduler_policy.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <tuple>
#include <vector>

#include "tests/runtime/scheduler_harness.h"

namespace tandem::runtime {
namespace {

using std::chrono::seconds;
using testing::SchedulerHarness;

SchedulerLimits limits(int64_t batch, int64_t chunk, int64_t running, int64_t context = 4096) {
  SchedulerLimits l;
  l.max_batch_tokens = batch;
  l.prefill_chunk_tokens = chunk;
  l.max_running = running;
  l.context_length = context;
  return l;
}

Clock::time_point at(int s) {
  return Clock::time_point{} + seconds(s);
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST_CASE("scheduler limits are validated", "[scheduler]") {
  const KvBudget kv{10, 16};
  CHECK(validate_scheduler_limits(limits(64, 32, 8), kv).ok());
  CHECK(validate_scheduler_limits(limits(64, 128, 8), kv).code() == StatusCode::kInvalidArgument);
  CHECK(validate_scheduler_limits(limits(4, 4, 8), kv).code() == StatusCode::kInvalidArgument);
  CHECK(validate_scheduler_limits(limits(0, 0, 1), kv).code() == StatusCode::kInvalidArgument);
  CHECK(validate_scheduler_limits(limits(64, 32, 8, 0), kv).code() == StatusCode::kInvalidArgument);
  CHECK(validate_scheduler_limits(limits(64, 32, 8), {0, 16}).code() ==
        StatusCode::kInvalidArgument);
}

TEST_CASE("requests that can never fit are rejected with the numbers", "[scheduler]") {
  const SchedulerLimits l = limits(64, 32, 8, 100);
  const KvBudget kv{4, 16};  // 64 tokens of KV
  Status context = check_request_fits(90, 20, 1, l, {100, 16});
  REQUIRE(context.code() == StatusCode::kInvalidArgument);
  CHECK(contains(context.message(), "90"));
  CHECK(contains(context.message(), "20"));
  CHECK(contains(context.message(), "110"));
  CHECK(contains(context.message(), "context length of 100"));

  Status blocks = check_request_fits(50, 20, 1, l, kv);
  REQUIRE(blocks.code() == StatusCode::kInvalidArgument);
  CHECK(contains(blocks.message(), "needs 5 KV blocks of 16 tokens"));
  CHECK(contains(blocks.message(), "4 blocks (64 tokens)"));

  CHECK(check_request_fits(44, 20, 1, l, kv).ok());  // exactly 64 tokens = 4 blocks
  CHECK(check_request_fits(0, 20, 1, l, kv).code() == StatusCode::kInvalidArgument);
  CHECK(check_request_fits(10, 0, 1, l, kv).code() == StatusCode::kInvalidArgument);
  CHECK(check_request_fits(10, 10, 8, l, kv).ok());  // up to max_running samples
  Status n = check_request_fits(10, 10, 9, l, kv);
  CHECK(n.code() == StatusCode::kInvalidArgument);
  CHECK(contains(n.message(), "n = 9"));
  CHECK(contains(n.message(), "between 1 and 8"));
  CHECK(check_request_fits(10, 10, 0, l, kv).code() == StatusCode::kInvalidArgument);
  // Huge values do not overflow the check.
  CHECK(check_request_fits(INT64_MAX, INT64_MAX, 1, l, kv).code() == StatusCode::kInvalidArgument);

  Request request;
  // Moved in, not assigned from the literal: g++ 12 at -O2 with ASan+UBSan reports a false
  // -Werror=restrict on assigning a short literal to a std::string (GCC PR 105329).
  request.id = std::string(1, 'r');
  request.prompt_token_ids.assign(100, 1);  // fills the context; unset max_tokens leaves 0
  CHECK(check_request(request, l, {100, 16}).code() == StatusCode::kInvalidArgument);
  request.prompt_token_ids.assign(60, 1);
  CHECK(resolve_max_tokens(std::nullopt, 60, l) == 40);
  CHECK(check_request(request, l, {100, 16}).ok());
  request.sampling.max_tokens = 41;
  CHECK(check_request(request, l, {100, 16}).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("admission follows arrival order within max_running", "[scheduler]") {
  SchedulerHarness h(limits(64, 32, 2), 32);
  REQUIRE(h.submit(1, 4, 1).ok());
  REQUIRE(h.submit(2, 4, 5).ok());
  REQUIRE(h.submit(3, 4, 5).ok());
  StepPlan p1 = h.step();
  CHECK(p1.admitted == std::vector<SeqId>{1, 2});
  CHECK(h.seq(1).reason == FinishReason::kLength);  // max_tokens 1: done after its prefill
  StepPlan p2 = h.step();
  CHECK(p2.admitted == std::vector<SeqId>{3});
  REQUIRE(p2.work.size() == 2);
  CHECK(p2.work[0].id == 2);
  CHECK(p2.work[0].kind == WorkKind::kDecode);
  CHECK(p2.work[1].id == 3);
  CHECK(p2.work[1].kind == WorkKind::kPrefill);
}

TEST_CASE("a request that does not fit the free KV blocks the queue behind it", "[scheduler]") {
  SchedulerHarness h(limits(256, 128, 8), 8);  // 128 tokens of KV
  REQUIRE(h.submit(1, 60, 4).ok());            // 4 blocks
  REQUIRE(h.submit(2, 100, 4).ok());           // 7 blocks: waits for 1
  REQUIRE(h.submit(3, 4, 4).ok());             // would fit, but must not overtake 2
  StepPlan p1 = h.step();
  CHECK(p1.admitted == std::vector<SeqId>{1});
  while (h.seq(1).final_events == 0) CHECK(h.step().admitted.empty());
  CHECK(h.step().admitted == std::vector<SeqId>{2, 3});  // 7 + 1 blocks: both fit now
}

TEST_CASE("long prompts are prefilled in chunks within the token budget", "[scheduler]") {
  SchedulerHarness h(limits(300, 256, 4), 100);
  REQUIRE(h.submit(1, 1000, 10).ok());
  std::vector<std::tuple<int64_t, int64_t, bool>> chunks;
  for (int i = 0; i < 4; ++i) {
    StepPlan p = h.step();
    REQUIRE(p.work.size() == 1);
    CHECK(p.work[0].kind == WorkKind::kPrefill);
    CHECK(p.work[0].kv_tokens == 1000);
    chunks.emplace_back(p.work[0].start, p.work[0].num_tokens, p.work[0].samples);
    if (i == 0) CHECK(p.blocks_to_allocate == 63);  // ceil(1000 / 16), reserved at admission
    if (i > 0) CHECK(p.blocks_to_allocate == 0);
  }
  using C = std::tuple<int64_t, int64_t, bool>;
  CHECK(chunks == std::vector<C>{C{0, 256, false}, C{256, 256, false}, C{512, 256, false},
                                 C{768, 232, true}});
  StepPlan decode = h.step();
  REQUIRE(decode.work.size() == 1);
  CHECK(decode.work[0].kind == WorkKind::kDecode);
  CHECK(decode.work[0].start == 1000);
  CHECK(decode.work[0].kv_tokens == 1001);
  CHECK(decode.blocks_to_allocate == 0);  // 1001 tokens still fit 63 blocks
}

TEST_CASE("decodes go first and prefill takes what is left of the budget", "[scheduler]") {
  SchedulerHarness h(limits(10, 8, 4), 64);
  REQUIRE(h.submit(1, 3, 20).ok());
  REQUIRE(h.submit(2, 3, 20).ok());
  REQUIRE(h.submit(3, 3, 20).ok());
  StepPlan p1 = h.step();
  CHECK(p1.batch_tokens == 9);
  REQUIRE(h.submit(4, 50, 5).ok());
  StepPlan p2 = h.step();
  REQUIRE(p2.work.size() == 4);
  for (int i = 0; i < 3; ++i) {
    CHECK(p2.work[i].kind == WorkKind::kDecode);
    CHECK(p2.work[i].num_tokens == 1);
  }
  CHECK(p2.work[3].id == 4);
  CHECK(p2.work[3].num_tokens == 7);
  CHECK(p2.batch_tokens == 10);
  StepPlan p3 = h.step();
  REQUIRE(p3.work.size() == 4);
  CHECK(p3.work[3].start == 7);
  CHECK(p3.work[3].num_tokens == 7);
}

TEST_CASE("running out of KV preempts the newest sequence, which is recomputed later",
          "[scheduler]") {
  SchedulerHarness h(limits(64, 64, 4), 6);  // 96 tokens of KV
  REQUIRE(h.submit(1, 16, 60).ok());
  REQUIRE(h.submit(2, 16, 60).ok());
  bool saw_preemption = false;
  bool saw_recompute = false;
  for (int step = 0; step < 1000 && !h.idle(); ++step) {
    const int64_t tokens_2 = h.seq(2).tokens();
    const bool waiting_2 = !h.waiting().empty() && h.waiting().front() == 2;
    StepPlan p = h.step();
    if (!p.preempted.empty()) {
      if (!saw_preemption) {
        CHECK(p.preempted == std::vector<SeqId>{2});  // the newer one goes
        CHECK(h.waiting().front() == 2);
        CHECK_FALSE(h.kv().has_sequence(2));
        CHECK(p.admitted.empty());
      }
      saw_preemption = true;
    }
    if (waiting_2 && !p.admitted.empty() && h.seq(2).preemptions > 0) {
      REQUIRE(p.admitted == std::vector<SeqId>{2});
      REQUIRE(p.work.back().id == 2);
      CHECK(p.work.back().start == 0);
      CHECK(p.work.back().kv_tokens == tokens_2);  // prompt + the tokens generated before
      CHECK(tokens_2 > 16);
      saw_recompute = true;
    }
  }
  CHECK(saw_preemption);
  CHECK(saw_recompute);
  REQUIRE(h.idle());
  for (SeqId id : {SeqId{1}, SeqId{2}}) {
    CHECK(h.seq(id).final_events == 1);
    CHECK(h.seq(id).reason == FinishReason::kLength);
    CHECK(h.seq(id).generated == 60);
  }
  CHECK(h.seq(1).preemptions == 0);
  CHECK(h.kv().free_blocks() == h.kv().total_blocks());
}

TEST_CASE("a deadline that passes while queued never allocates KV (C2)", "[scheduler]") {
  SchedulerHarness h(limits(64, 32, 1), 16);
  REQUIRE(h.submit(1, 10, 50).ok());
  REQUIRE(h.submit(2, 10, 5, at(5)).ok());
  REQUIRE(h.submit(3, 10, 5, at(0)).ok());  // already expired at the first step
  StepPlan p0 = h.step(at(1));
  REQUIRE(p0.dropped.size() == 1);
  CHECK(p0.dropped[0].id == 3);
  CHECK(p0.dropped[0].reason == FinishReason::kDeadline);
  CHECK_FALSE(p0.dropped[0].was_running);
  for (int s = 2; s < 5; ++s) CHECK(h.step(at(s)).dropped.empty());
  StepPlan p5 = h.step(at(5));
  REQUIRE(p5.dropped.size() == 1);
  CHECK(p5.dropped[0].id == 2);
  CHECK(p5.dropped[0].reason == FinishReason::kDeadline);
  for (SeqId id : {SeqId{2}, SeqId{3}}) {
    CHECK_FALSE(h.seq(id).ever_had_kv);
    CHECK(h.seq(id).final_events == 1);
  }
  CHECK(h.seq(1).final_events == 0);
}

TEST_CASE("a running sequence past its deadline leaves with its blocks freed", "[scheduler]") {
  SchedulerHarness h(limits(64, 32, 4), 16);
  REQUIRE(h.submit(1, 40, 50, at(3)).ok());
  h.step(at(0));
  h.step(at(1));
  CHECK(h.kv().used_blocks() == 3);
  StepPlan p = h.step(at(3));
  REQUIRE(p.dropped.size() == 1);
  CHECK(p.dropped[0].was_running);
  CHECK(p.dropped[0].reason == FinishReason::kDeadline);
  CHECK(p.work.empty());
  CHECK(h.kv().used_blocks() == 0);
}

// Runs three sequences; cancels sequence 2 (queued, prefilling or decoding) at `cancel_step`.
// Returns the work of sequences 1 and 3, step by step.
std::vector<std::tuple<int, SeqId, int64_t, int64_t>> run_three(int cancel_step) {
  SchedulerHarness h(limits(40, 16, 2), 64);
  REQUIRE(h.submit(1, 30, 12).ok());
  REQUIRE(h.submit(2, 30, 12).ok());
  REQUIRE(h.submit(3, 30, 12).ok());
  std::vector<std::tuple<int, SeqId, int64_t, int64_t>> others;
  for (int step = 0; step < 200 && !h.idle(); ++step) {
    if (step == cancel_step) h.cancel(2);
    StepPlan p = h.step();
    for (const ScheduledWork& w : p.work) {
      if (w.id != 2) others.emplace_back(step, w.id, w.start, w.num_tokens);
    }
  }
  REQUIRE(h.idle());
  CHECK(h.kv().free_blocks() == h.kv().total_blocks());
  for (SeqId id : {SeqId{1}, SeqId{2}, SeqId{3}}) CHECK(h.seq(id).final_events == 1);
  if (cancel_step < 100) CHECK(h.seq(2).reason == FinishReason::kAbort);
  CHECK(h.seq(1).reason == FinishReason::kLength);
  CHECK(h.seq(3).reason == FinishReason::kLength);
  return others;
}

TEST_CASE("cancelling one request leaves the others untouched (C6)", "[scheduler]") {
  const auto reference = run_three(1000);  // never cancelled
  // Sequence 1 is unaffected whenever 2 is cancelled; 3 only gains (admitted earlier).
  for (int cancel_step : {0, 1, 3, 8}) {
    const auto others = run_three(cancel_step);
    std::vector<std::tuple<int, SeqId, int64_t, int64_t>> ref1, got1;
    for (const auto& w : reference)
      if (std::get<1>(w) == 1) ref1.push_back(w);
    for (const auto& w : others)
      if (std::get<1>(w) == 1) got1.push_back(w);
    CHECK(got1 == ref1);
    int64_t tokens3 = 0;
    for (const auto& w : others)
      if (std::get<1>(w) == 3) tokens3 += std::get<3>(w);
    CHECK(tokens3 == 30 + 11);  // full prefill + 11 decodes
  }
}

TEST_CASE("a cached prefix: admission starts after it and needs only admit_blocks", "[scheduler]") {
  const SchedulerLimits l = limits(64, 32, 8);
  const KvBudget kv{10, 16};
  const std::vector<RunningSeq> running;
  // 100 tokens need 7 blocks; 80 are cached (5 blocks), 2 of them unreferenced: 2 new + 2 = 4.
  std::vector<WaitingSeq> waiting(1);
  waiting[0].id = 1;
  waiting[0].tokens = 100;
  waiting[0].max_total_tokens = 110;
  waiting[0].cached_tokens = 80;
  waiting[0].admit_blocks = 4;
  StepPlan plan = plan_step({&running, &waiting, 4, at(0)}, l, kv);
  REQUIRE(plan.admitted == std::vector<SeqId>{1});
  REQUIRE(plan.work.size() == 1);
  CHECK(plan.work[0].start == 80);
  CHECK(plan.work[0].num_tokens == 20);
  CHECK(plan.work[0].kv_tokens == 100);
  CHECK(plan.work[0].samples);
  CHECK(plan.blocks_to_allocate == 4);
  // One block short: not admitted (without the cache it would need 7).
  CHECK(plan_step({&running, &waiting, 3, at(0)}, l, kv).admitted.empty());
  // A long uncached rest is chunked from the cached end.
  waiting[0].cached_tokens = 16;
  waiting[0].admit_blocks = 6;
  plan = plan_step({&running, &waiting, 6, at(0)}, l, kv);
  REQUIRE(plan.work.size() == 1);
  CHECK(plan.work[0].start == 16);
  CHECK(plan.work[0].num_tokens == 32);
  CHECK_FALSE(plan.work[0].samples);
}

TEST_CASE("preemption counts only the blocks a victim alone holds as freed", "[scheduler]") {
  const SchedulerLimits l = limits(64, 32, 8);
  const KvBudget kv{6, 16};
  // Sequence 1 decodes into a new block; none is free. 2 holds 3 blocks, all shared (a cached
  // prefix other requests hold too); 3, the newest, holds 3 of which 1 alone.
  std::vector<RunningSeq> running(3);
  running[0].id = 1;
  running[0].tokens = 33;
  running[0].computed_tokens = 32;
  running[0].allocated_blocks = 2;
  running[1].id = 2;
  running[1].tokens = 41;
  running[1].computed_tokens = 40;
  running[1].allocated_blocks = 3;
  running[1].releasable_blocks = 0;  // all shared
  running[2].id = 3;
  running[2].tokens = 40;
  running[2].computed_tokens = 39;
  running[2].allocated_blocks = 3;
  running[2].releasable_blocks = 1;
  const std::vector<WaitingSeq> waiting;
  const StepPlan plan = plan_step({&running, &waiting, 0, at(0)}, l, kv);
  // The newest (3) goes first and frees 1: enough for A. B stays and decodes in its own block.
  CHECK(plan.preempted == std::vector<SeqId>{3});
  REQUIRE(plan.work.size() == 2);
  CHECK(plan.work[0].id == 1);
  CHECK(plan.work[1].id == 2);
  CHECK(plan.blocks_to_allocate == 1);
  // Were 3's block shared too, freeing it would give nothing: 2 goes as well, and then A itself.
  running[2].releasable_blocks = 0;
  const StepPlan starved = plan_step({&running, &waiting, 0, at(0)}, l, kv);
  CHECK(starved.preempted == std::vector<SeqId>{1, 2, 3});
  CHECK(starved.work.empty());
}

}  // namespace
}  // namespace tandem::runtime
