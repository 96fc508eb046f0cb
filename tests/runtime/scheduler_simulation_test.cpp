// Randomized simulation: 64 requests through RequestQueue and the scheduling policy with a fake
// model step, random cancellations, deadlines and early stops; checks exactly one final event per
// request and that every KV block is free at the end.
#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/runtime/request_queue.h"
#include "engine/runtime/scheduler_policy.h"
#include "tests/runtime/scheduler_harness.h"

namespace tandem::runtime {
namespace {

using std::chrono::seconds;

TEST_CASE("64 random requests with random cancellations all end exactly once", "[scheduler]") {
  const uint32_t seed = GENERATE(1u, 2u, 3u, 4u, 5u);
  std::mt19937 rng(seed);
  SchedulerLimits limits;
  limits.max_batch_tokens = 96;
  limits.prefill_chunk_tokens = 32;
  limits.max_running = 8;
  limits.context_length = 512;
  testing::SchedulerHarness h(limits, 40);  // 640 tokens of KV: preemption is frequent
  const KvBudget budget = h.budget();
  RequestQueue queue(64, [&](const Request& r) { return check_request(r, limits, budget); });

  constexpr int kRequests = 64;
  const Clock::time_point t0{};
  std::vector<RequestHandle> handles;
  for (int i = 0; i < kRequests; ++i) {
    Request r;
    r.id = "req-" + std::to_string(i);
    r.prompt_token_ids.assign(1 + rng() % 200, 3);
    r.sampling.max_tokens = 1 + static_cast<int64_t>(rng() % 80);
    if (rng() % 8 == 0) r.deadline = t0 + seconds(static_cast<int>(rng() % 200));
    auto submitted = queue.submit(std::move(r));
    REQUIRE(submitted.ok());
    handles.push_back(std::move(submitted).value());
  }
  // A 65th does not fit the queue.
  CHECK(queue
            .submit([] {
              Request r;
              r.id = "extra";
              r.prompt_token_ids = {1};
              return r;
            }())
            .status()
            .code() == StatusCode::kResourceExhausted);

  std::map<SeqId, std::shared_ptr<RequestChannel>> channels;
  SeqId next_id = 0;
  for (AcceptedRequest& accepted : queue.drain()) {
    const SeqId id = next_id++;
    const auto prompt = static_cast<int64_t>(accepted.request.prompt_token_ids.size());
    REQUIRE(h.submit(id, prompt, *accepted.request.sampling.max_tokens, accepted.request.deadline)
                .ok());
    channels[id] = accepted.channel;
  }
  REQUIRE(channels.size() == kRequests);
  h.set_cancelled_flag([&](SeqId id) { return channels.at(id)->cancelled(); });
  h.set_on_token([&](SeqId id) {
    queue.push_tokens(*channels.at(id), {static_cast<TokenId>(h.seq(id).generated)});
  });
  h.set_on_finish([&](SeqId id, FinishReason reason) {
    const testing::SimSeq& s = h.seq(id);
    Status error =
        reason == FinishReason::kDeadline ? deadline_exceeded_error("deadline passed") : Status();
    queue.finish(*channels.at(id), reason, {s.prompt, s.generated, 0}, error);
  });

  int step = 0;
  for (; step < 20000 && !h.idle(); ++step) {
    if (rng() % 10 == 0) handles[rng() % kRequests].cancel();
    h.step(t0 + seconds(step), [&](SeqId) { return rng() % 50 == 0; });
  }
  REQUIRE(h.idle());
  CHECK(h.kv().free_blocks() == h.kv().total_blocks());
  CHECK(h.kv().check_invariants().ok());
  CHECK(queue.in_flight() == 0);

  std::map<FinishReason, int> reasons;
  for (int i = 0; i < kRequests; ++i) {
    const testing::SimSeq& s = h.seq(static_cast<SeqId>(i));
    CHECK(s.final_events == 1);
    int finals = 0;
    int64_t tokens = 0;
    while (auto event = handles[i].try_next()) {
      tokens += static_cast<int64_t>(event->token_ids.size());
      if (event->is_final) {
        ++finals;
        reasons[event->finish_reason]++;
        CHECK(event->usage.completion_tokens == tokens);
        CHECK(event->usage.prompt_tokens == s.prompt);
        if (event->finish_reason == FinishReason::kLength) CHECK(tokens == s.max_tokens);
        if (event->finish_reason == FinishReason::kDeadline) {
          CHECK(event->error.code() == StatusCode::kDeadlineExceeded);
        }
      }
    }
    CHECK(finals == 1);
    CHECK(handles[i].done());
  }
  INFO("seed " << seed << ": " << step << " steps, " << h.preemptions() << " preemptions");
  CHECK(h.preemptions() > 0);
  CHECK(reasons[FinishReason::kLength] > 0);
  CHECK(reasons[FinishReason::kAbort] > 0);
}

}  // namespace
}  // namespace tandem::runtime
