// Tests of the engine loop's prefix cache (reuse, eviction, preemption, FlushCache's drop) and
// of n samples per request (forks, seeds, preemption, cancellation), against an engine without
// the cache and against one-sample requests.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/runtime/scheduler.h"
#include "tests/runtime/scheduler_engine.h"

namespace tandem::runtime {
namespace {

using namespace testing;  // NOLINT: the engine-loop test helpers

// Two chat turns: the second prompt is the first prompt, its answer and a new question.
std::pair<Outcome, Outcome> two_turns(Scheduler& scheduler) {
  Request first = greedy_request("turn1", long_prompt(), 8);
  first.sampling.logprobs = 3;
  const Outcome a = run_one(scheduler, first);
  std::vector<int32_t> next = long_prompt();
  next.insert(next.end(), a.tokens.begin(), a.tokens.end());
  const std::vector<int32_t> question = fox_tokens();
  next.insert(next.end(), question.begin(), question.begin() + 5);
  Request second = greedy_request("turn2", next, 8);
  second.sampling.logprobs = 3;
  return {a, run_one(scheduler, second)};
}

void check_same_logprobs(const Outcome& got, const Outcome& want) {
  REQUIRE(got.logprobs.size() == want.logprobs.size());
  for (size_t i = 0; i < got.logprobs.size(); ++i) {
    INFO("output token " << i);
    CHECK(got.logprobs[i].logprob == Approx(want.logprobs[i].logprob).margin(1e-4));
    CHECK(got.logprobs[i].top_ids == want.logprobs[i].top_ids);
  }
}

TEST_CASE("scheduler: a chat's second turn reuses the first turn's KV, same tokens and logprobs",
          "[runtime][scheduler_loop][prefix]") {
  Engine cold = make_uncached_engine(small_limits());
  Engine warm = make_engine(small_limits());
  CHECK_FALSE(cold.scheduler->prefix_caching());
  CHECK(warm.scheduler->prefix_caching());
  const auto [cold1, cold2] = two_turns(*cold.scheduler);
  const auto [warm1, warm2] = two_turns(*warm.scheduler);
  CHECK(warm1.usage.cached_tokens == 0);
  CHECK(cold2.usage.cached_tokens == 0);
  // Turn 1 left KV for its 64 prompt tokens + 7 fed outputs: 4 full blocks of 16.
  CHECK(warm2.usage.cached_tokens == 64);
  CHECK(warm2.event_cached_tokens == 64);
  CHECK(warm2.usage.prompt_tokens == 77);
  CHECK(warm1.tokens == cold1.tokens);
  CHECK(warm2.tokens == cold2.tokens);
  check_same_logprobs(warm2, cold2);
  const SchedulerLoad load = warm.scheduler->load();
  CHECK(load.prefix_query_tokens == 64 + 77);
  CHECK(load.prefix_hit_tokens == 64);
  cold.scheduler->stop();
  warm.scheduler->stop();
  CHECK(warm.scheduler->kv_free_blocks() == warm.scheduler->kv_total_blocks());
  CHECK(warm.scheduler->kv_check_invariants().ok());
}

TEST_CASE("scheduler: a prompt cached whole recomputes only its last token",
          "[runtime][scheduler_loop][prefix]") {
  Engine e = make_engine(small_limits());
  std::vector<int32_t> prompt = long_prompt();
  prompt.resize(32);  // exactly two blocks
  Request r = greedy_request("same", prompt, 6);
  r.sampling.logprobs = 2;
  const Outcome first = run_one(*e.scheduler, r);
  const Outcome again = run_one(*e.scheduler, r);
  CHECK(first.usage.cached_tokens == 0);
  CHECK(again.usage.cached_tokens == 31);
  CHECK(again.tokens == first.tokens);
  check_same_logprobs(again, first);
  // prompt_logprobs need every prompt position's logits: nothing is reused.
  Request with_prompt_lp = r;
  with_prompt_lp.sampling.prompt_logprobs = 1;
  const Outcome computed = run_one(*e.scheduler, with_prompt_lp);
  CHECK(computed.usage.cached_tokens == 0);
  CHECK(computed.tokens == first.tokens);
  e.scheduler->stop();
  CHECK(e.scheduler->kv_check_invariants().ok());
}

TEST_CASE("scheduler: under KV pressure cached blocks are evicted and results stay the same",
          "[runtime][scheduler_loop][prefix]") {
  // 8 blocks of 16: the 16 prompts (2..47 tokens + 8) evict each other's cached blocks, twice.
  SchedulerLimits limits = small_limits();
  limits.context_length = 64;
  Engine e = make_engine(limits, /*kv_blocks=*/8);
  const auto& alone = alone_tokens();
  for (int round = 0; round < 2; ++round) {
    const auto together = run_together(*e.scheduler);
    for (size_t i = 0; i < together.size(); ++i) {
      INFO("round " << round << ", request " << i);
      REQUIRE(together[i].finals == 1);
      CHECK(together[i].tokens == alone[i]);
    }
  }
  const SchedulerLoad load = e.scheduler->load();
  CHECK(load.kv_evicted_blocks > 0);
  CHECK(load.kv_cached_blocks <= load.kv_total_blocks);
  e.scheduler->stop();
  CHECK(e.scheduler->kv_free_blocks() == e.scheduler->kv_total_blocks());
  CHECK(e.scheduler->kv_check_invariants().ok());
}

TEST_CASE("scheduler: requests sharing a cached prefix preempt each other and stay exact",
          "[runtime][scheduler_loop][prefix]") {
  // 7 blocks of 16. Four requests share a 32-token cached prefix (2 blocks they all hold) and
  // each grows to 2 + 2 more blocks: preemption must count only a victim's own blocks as freed.
  SchedulerLimits limits = small_limits();
  limits.context_length = 64;
  std::vector<int32_t> prefix = long_prompt();
  prefix.resize(32);
  std::vector<Request> requests;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> prompt = prefix;
    for (int j = 0; j <= i; ++j) prompt.push_back(fox_tokens()[static_cast<size_t>(j + i)]);
    requests.push_back(greedy_request("shared" + std::to_string(i), prompt, 24));
  }
  Engine cold = make_uncached_engine(limits, /*kv_blocks=*/7);
  std::vector<std::vector<int32_t>> want;
  for (const Request& r : requests) want.push_back(run_one(*cold.scheduler, r).tokens);
  cold.scheduler->stop();

  Engine warm = make_engine(limits, /*kv_blocks=*/7);
  run_one(*warm.scheduler, greedy_request("warm-up", prefix, 1));  // caches the 2 prefix blocks
  std::vector<RequestHandle> handles;
  for (const Request& r : requests) {
    auto h = warm.scheduler->submit(r);
    REQUIRE(h.ok());
    handles.push_back(std::move(h).value());
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    INFO("request " << i);
    const Outcome o = collect(handles[i]);
    REQUIRE(o.finals == 1);
    CHECK(o.reason == FinishReason::kLength);
    CHECK(o.tokens == want[i]);
    CHECK(o.usage.cached_tokens == 32);
  }
  CHECK(warm.scheduler->preemptions() > 0);
  warm.scheduler->stop();
  CHECK(warm.scheduler->kv_free_blocks() == warm.scheduler->kv_total_blocks());
  CHECK(warm.scheduler->kv_check_invariants().ok());
}

TEST_CASE("scheduler: dropping the holder of a cached prefix a waiting request adopts plans again",
          "[runtime][scheduler_loop][prefix]") {
  // 8 blocks. A (32-token prompt P, 2 blocks) and C (20 tokens) run; B (P + 72 tokens, 7 blocks)
  // waits. A is cancelled after step 2: dropping it frees A's 3 blocks, but B adopting P takes 2
  // of them back, so B (5 new blocks) does not fit yet and must wait for C. Planned once, the
  // step would admit B and then run out of blocks in the middle of the pass.
  const std::vector<int32_t> prompt = long_prompt();
  const std::vector<int32_t> p(prompt.begin(), prompt.begin() + 32);
  std::vector<int32_t> b_prompt = p;
  for (int i = 0; i < 72; ++i) b_prompt.push_back(fox_tokens()[static_cast<size_t>(i) % 20]);
  Scheduler* scheduler = nullptr;
  Engine e = make_engine(small_limits(), /*kv_blocks=*/8, 64, false, /*start=*/false,
                         [&scheduler](int64_t steps) {
                           if (steps == 2) scheduler->cancel("A");
                         });
  scheduler = e.scheduler.get();
  auto a = scheduler->submit(greedy_request("A", p, 60));
  auto c = scheduler->submit(greedy_request("C", fox_tokens(), 8));
  auto b = scheduler->submit(greedy_request("B", b_prompt, 4));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(c.ok());
  REQUIRE(scheduler->start().ok());
  const Outcome oa = collect(a.value());
  const Outcome oc = collect(c.value());
  const Outcome ob = collect(b.value());
  CHECK(oa.reason == FinishReason::kAbort);
  CHECK(oc.reason == FinishReason::kLength);
  REQUIRE(ob.finals == 1);
  CHECK(ob.reason == FinishReason::kLength);
  CHECK(ob.usage.cached_tokens == 32);
  Engine cold = make_uncached_engine(small_limits());
  CHECK(ob.tokens == run_one(*cold.scheduler, greedy_request("B", b_prompt, 4)).tokens);
  cold.scheduler->stop();
  e.scheduler->stop();
  CHECK(e.scheduler->kv_check_invariants().ok());
}

TEST_CASE("scheduler: drop_prefix_cache forgets the cached blocks; later requests compute again",
          "[runtime][scheduler_loop][prefix]") {
  Engine e = make_engine(small_limits());
  const Request r = greedy_request("again", long_prompt(), 4);
  const Outcome first = run_one(*e.scheduler, r);
  CHECK(run_one(*e.scheduler, r).usage.cached_tokens == 63);
  Result<PrefixCacheDrop> dropped = e.scheduler->drop_prefix_cache(std::chrono::seconds(30));
  REQUIRE(dropped.ok());
  CHECK(dropped->dropped_blocks == 4);  // the prompt's 4 full blocks (64 tokens + 3 fed)
  CHECK(dropped->held_blocks == 0);
  const Outcome after = run_one(*e.scheduler, r);
  CHECK(after.usage.cached_tokens == 0);
  CHECK(after.tokens == first.tokens);
  e.scheduler->stop();
  CHECK(e.scheduler->drop_prefix_cache(std::chrono::seconds(1)).status().code() ==
        StatusCode::kFailedPrecondition);
  Engine off = make_uncached_engine(small_limits());
  CHECK(off.scheduler->drop_prefix_cache(std::chrono::seconds(1)).status().code() ==
        StatusCode::kFailedPrecondition);
  off.scheduler->stop();
}

// Reads the events of an n-sample request until every sample's final one, by sample index.
std::vector<Outcome> collect_samples(RequestHandle& handle, int64_t n) {
  std::vector<Outcome> out(static_cast<size_t>(n));
  while (!handle.done()) {
    auto ev = handle.next(std::chrono::duration_cast<std::chrono::milliseconds>(kEventTimeout));
    REQUIRE(ev.has_value());
    REQUIRE(ev->index >= 0);
    REQUIRE(ev->index < n);
    Outcome& o = out[static_cast<size_t>(ev->index)];
    CHECK(o.finals == 0);  // nothing of a sample after its final event
    o.tokens.insert(o.tokens.end(), ev->token_ids.begin(), ev->token_ids.end());
    if (ev->is_final) {
      ++o.finals;
      o.reason = ev->finish_reason;
      o.usage = ev->usage;
    }
  }
  CHECK_FALSE(handle.try_next().has_value());
  return out;
}

Request sampled_request(const std::string& id, uint64_t seed, int64_t n) {
  Request r = greedy_request(id, long_prompt(), 10);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = seed;
  r.n = n;
  return r;
}

TEST_CASE("scheduler: n samples share the prompt's KV; sample i is the seed + i request",
          "[runtime][scheduler_loop][n]") {
  for (const bool cached : {false, true}) {
    INFO("prefix cache " << cached);
    Engine e = cached ? make_engine(small_limits()) : make_uncached_engine(small_limits());
    // Greedy: every sample is the one greedy answer.
    const Outcome single = run_one(*e.scheduler, greedy_request("g1", long_prompt(), 6));
    Request greedy3 = greedy_request("g3", long_prompt(), 6);
    greedy3.n = 3;
    auto h = e.scheduler->submit(greedy3);
    REQUIRE(h.ok());
    for (const Outcome& o : collect_samples(h.value(), 3)) {
      CHECK(o.finals == 1);
      CHECK(o.reason == FinishReason::kLength);
      CHECK(o.tokens == single.tokens);
      CHECK(o.usage.prompt_tokens == 64);
      CHECK(o.usage.completion_tokens == 6);
    }
    // Seeded sampling: sample i of (seed 7, n 4) equals the one-sample request with seed 7 + i.
    auto h4 = e.scheduler->submit(sampled_request("s4", 7, 4));
    REQUIRE(h4.ok());
    const std::vector<Outcome> samples = collect_samples(h4.value(), 4);
    for (uint64_t i = 0; i < 4; ++i) {
      INFO("sample " << i);
      const Outcome alone =
          run_one(*e.scheduler, sampled_request("s1-" + std::to_string(i), 7 + i, 1));
      CHECK(samples[i].tokens == alone.tokens);
      CHECK(samples[i].finals == 1);
    }
    CHECK(samples[0].tokens != samples[1].tokens);  // different seeds, different draws
    e.scheduler->stop();
    CHECK(e.scheduler->kv_free_blocks() == e.scheduler->kv_total_blocks());
    CHECK(e.scheduler->kv_check_invariants().ok());
  }
}

TEST_CASE("scheduler: n samples under KV pressure are preempted one by one and stay exact",
          "[runtime][scheduler_loop][n]") {
  // 8 blocks of 16: 4 samples of a 59-token prompt (3 full blocks and a partial one, shared)
  // growing by 24 tokens each need 4 + 4 x 3 blocks (each copies the partial block on its first
  // write), so samples are preempted and recomputed.
  SchedulerLimits limits = small_limits();
  limits.context_length = 96;
  Request r = sampled_request("ref", 11, 4);
  r.prompt_token_ids.resize(59);
  r.sampling.max_tokens = 24;
  Engine big = make_engine(limits);
  auto ref = big.scheduler->submit(r);
  REQUIRE(ref.ok());
  const std::vector<Outcome> want = collect_samples(ref.value(), 4);
  big.scheduler->stop();
  Engine e = make_engine(limits, /*kv_blocks=*/8);
  auto h = e.scheduler->submit(r);
  REQUIRE(h.ok());
  const std::vector<Outcome> got = collect_samples(h.value(), 4);
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("sample " << i);
    CHECK(got[i].tokens == want[i].tokens);
  }
  CHECK(e.scheduler->preemptions() > 0);
  e.scheduler->stop();
  CHECK(e.scheduler->kv_free_blocks() == e.scheduler->kv_total_blocks());
  CHECK(e.scheduler->kv_check_invariants().ok());
}

TEST_CASE("scheduler: n samples of a sliding-window model are independent sequences",
          "[runtime][scheduler_loop][n][gpt-oss]") {
  // Windowed layers keep KV in per-sequence rings, which a fork cannot share: each sample
  // prefills on its own, and sample i is still the seed + i request.
  const std::string dir = std::string(TANDEM_SHARED_DIR) + "/data/tiny-gpt-oss/";
  const auto ref = read_json(dir + "ref-all-f32.json");
  Engine e = make_engine(small_limits(), /*kv_blocks=*/40, 64, false, true, {},
                         dir + "tiny-gpt-oss-all-f32.gguf");
  CHECK_FALSE(e.scheduler->prefix_caching());
  Request r = greedy_request("w", ref["prompts"][0]["tokens"].get<std::vector<int32_t>>(), 6);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 21;
  r.n = 2;
  auto h = e.scheduler->submit(r);
  REQUIRE(h.ok());
  const std::vector<Outcome> got = collect_samples(h.value(), 2);
  for (uint64_t i = 0; i < 2; ++i) {
    Request alone = r;
    alone.id = "w-alone";
    alone.n = 1;
    alone.sampling.seed = 21 + i;
    CHECK(got[i].tokens == run_one(*e.scheduler, alone).tokens);
  }
  e.scheduler->stop();
  CHECK(e.scheduler->kv_free_blocks() == e.scheduler->kv_total_blocks());
}

TEST_CASE("scheduler: cancelling an n-sample request ends every sample, forked or not",
          "[runtime][scheduler_loop][n]") {
  Engine e = make_engine(small_limits());
  Request r = sampled_request("cancel", 3, 3);
  r.sampling.max_tokens = 40;
  auto h = e.scheduler->submit(r);
  REQUIRE(h.ok());
  h.value().cancel();
  const std::vector<Outcome> got = collect_samples(h.value(), 3);
  for (const Outcome& o : got) {
    CHECK(o.finals == 1);
    CHECK(o.reason == FinishReason::kAbort);
  }
  // The id is free again once every sample ended.
  CHECK(run_one(*e.scheduler, greedy_request("cancel", long_prompt(), 1)).finals == 1);
  e.scheduler->stop();
  CHECK(e.scheduler->kv_check_invariants().ok());
}

}  // namespace
}  // namespace tandem::runtime
