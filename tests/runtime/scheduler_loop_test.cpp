// Tests of the engine loop (Scheduler) on the tiny F32 model: batch invariance, chunked prefill
// against llama.cpp's greedy tokens, preemption/recompute, cancellation, deadlines, stop, stress,
// and what the routing observer is told.
#include <atomic>
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/runtime/scheduler.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/runtime/runtime_fixture.h"

namespace tandem::runtime {
namespace {

using testing::load_model;
using testing::LoadedModel;
using testing::read_json;
using testing::tiny_moe_dir;

constexpr auto kEventTimeout = std::chrono::seconds(120);

struct Engine {
  std::unique_ptr<LoadedModel> model;               // outlives the scheduler (declared first)
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;  // likewise; may be null
  std::unique_ptr<Scheduler> scheduler;
};

SchedulerLimits small_limits() {
  SchedulerLimits limits;
  limits.max_batch_tokens = 256;
  limits.prefill_chunk_tokens = 256;
  limits.max_running = 16;
  limits.context_length = 128;
  return limits;
}

Engine make_engine(const SchedulerLimits& limits, int64_t kv_blocks = 0, size_t capacity = 64,
                   bool with_tokenizer = false, bool start = true,
                   std::function<void(int64_t)> after_step = {},
                   const std::string& model_path = tiny_moe_dir() + "tiny-moe-f32.gguf",
                   std::function<Status()> weights_check = {}, bool prefix_caching = true) {
  Engine e;
  e.model = load_model(model_path, 2);
  SchedulerOptions options;
  if (with_tokenizer) {
    auto tok = tokenizer::Tokenizer::load_gguf(tiny_moe_dir() + "tiny-moe-f32.gguf");
    INFO((tok.ok() ? "" : tok.status().to_string()));
    REQUIRE(tok.ok());
    e.tokenizer = std::make_unique<tokenizer::Tokenizer>(std::move(tok).value());
    options.tokenizer = e.tokenizer.get();
  }
  options.limits = limits;
  options.kv_blocks = kv_blocks;
  options.queue_capacity = capacity;
  options.after_step = std::move(after_step);
  options.weights_check = std::move(weights_check);
  options.prefix_caching = prefix_caching;
  auto s = Scheduler::create(std::move(e.model->runner), options);
  INFO((s.ok() ? "" : s.status().to_string()));
  REQUIRE(s.ok());
  e.scheduler = std::move(s).value();
  if (start) REQUIRE(e.scheduler->start().ok());
  return e;
}

Request greedy_request(const std::string& id, std::vector<int32_t> prompt, int64_t max_tokens) {
  Request r;
  r.id = id;
  r.prompt_token_ids = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.sampling.ignore_eos = true;
  r.sampling.max_tokens = max_tokens;
  return r;
}

struct Outcome {
  std::vector<int32_t> tokens;
  int finals = 0;
  FinishReason reason = FinishReason::kStop;
  std::string text;
  Usage usage;
  Status error;
  bool timed_out = false;
  std::vector<TokenLogprobs> logprobs;  // per output token, when asked for
  int64_t event_cached_tokens = -1;     // TokenEvent::cached_tokens of the first token event
};

// Reads events until the final one; then checks nothing follows it. Thread-safe (no REQUIREs).
Outcome collect(RequestHandle& handle, bool cancel_after_first = false) {
  Outcome o;
  while (!handle.done()) {
    auto ev = handle.next(std::chrono::duration_cast<std::chrono::milliseconds>(kEventTimeout));
    if (!ev) {
      o.timed_out = true;
      return o;
    }
    o.tokens.insert(o.tokens.end(), ev->token_ids.begin(), ev->token_ids.end());
    o.logprobs.insert(o.logprobs.end(), ev->logprobs.begin(), ev->logprobs.end());
    if (o.event_cached_tokens < 0 && !ev->token_ids.empty()) {
      o.event_cached_tokens = ev->cached_tokens;
    }
    o.text += ev->text;
    if (ev->is_final) {
      ++o.finals;
      o.reason = ev->finish_reason;
      o.usage = ev->usage;
      o.error = ev->error;
    } else if (cancel_after_first) {
      handle.cancel();
    }
  }
  if (handle.try_next()) ++o.finals;  // a second final (or anything after it) is a bug
  return o;
}

std::vector<int32_t> fox_tokens() {
  const auto ref = read_json(tiny_moe_dir() + "ref-f32.json");
  return ref["prompts"][0]["tokens"].get<std::vector<int32_t>>();
}

// 16 prompts of different lengths (2 .. 47 tokens) made from the fox prompt's ids.
std::vector<std::vector<int32_t>> prompts16() {
  const auto fox = fox_tokens();
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < 16; ++i) {
    const size_t len = 2 + (i * 7) % 46;
    std::vector<int32_t> p;
    for (size_t j = 0; j < len; ++j) p.push_back(fox[(i + j * 3) % fox.size()]);
    out.push_back(p);
  }
  return out;
}

constexpr int64_t kGenTokens = 8;

// An engine without the prefix cache: every token computed, the reference for cached runs.
Engine make_uncached_engine(const SchedulerLimits& limits, int64_t kv_blocks = 0) {
  return make_engine(limits, kv_blocks, 64, false, true, {}, tiny_moe_dir() + "tiny-moe-f32.gguf",
                     {}, /*prefix_caching=*/false);
}

// Each of prompts16() run alone (one at a time) without the prefix cache, computed once.
const std::vector<std::vector<int32_t>>& alone_tokens() {
  static const std::vector<std::vector<int32_t>> tokens = [] {
    Engine e = make_uncached_engine(small_limits());
    std::vector<std::vector<int32_t>> out;
    const auto prompts = prompts16();
    for (size_t i = 0; i < prompts.size(); ++i) {
      auto h =
          e.scheduler->submit(greedy_request("alone" + std::to_string(i), prompts[i], kGenTokens));
      REQUIRE(h.ok());
      const Outcome o = collect(h.value());
      REQUIRE(o.finals == 1);
      REQUIRE(o.reason == FinishReason::kLength);
      REQUIRE(o.tokens.size() == static_cast<size_t>(kGenTokens));
      out.push_back(o.tokens);
    }
    e.scheduler->stop();
    return out;
  }();
  return tokens;
}

// Submits all 16 prompts at once and returns their tokens.
std::vector<Outcome> run_together(Scheduler& scheduler) {
  const auto prompts = prompts16();
  std::vector<RequestHandle> handles;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto h = scheduler.submit(greedy_request("t" + std::to_string(i), prompts[i], kGenTokens));
    REQUIRE(h.ok());
    handles.push_back(std::move(h).value());
  }
  std::vector<Outcome> out;
  for (auto& h : handles) out.push_back(collect(h));
  return out;
}

TEST_CASE("scheduler: greedy tokens are identical alone and batched with 15 others",
          "[runtime][scheduler_loop]") {
  const auto& alone = alone_tokens();
  Engine e = make_engine(small_limits());
  const auto together = run_together(*e.scheduler);
  for (size_t i = 0; i < together.size(); ++i) {
    INFO("request " << i);
    REQUIRE(together[i].finals == 1);
    CHECK(together[i].reason == FinishReason::kLength);
    CHECK(together[i].tokens == alone[i]);
    CHECK(together[i].usage.prompt_tokens == static_cast<int64_t>(prompts16()[i].size()));
    CHECK(together[i].usage.completion_tokens == kGenTokens);
  }
  // They shared forward passes: far fewer steps than 16 × 8 one-sequence decodes.
  CHECK(e.scheduler->steps() < 16 * kGenTokens / 2);
  e.scheduler->stop();
  CHECK(e.scheduler->kv_free_blocks() == e.scheduler->kv_total_blocks());
}

TEST_CASE("scheduler: chunked prefill gives llama.cpp's greedy tokens and the unchunked ones",
          "[runtime][scheduler_loop]") {
  const auto ref = read_json(tiny_moe_dir() + "ref-f32.json");
  const auto want = ref["prompts"][0]["greedy_tokens"].get<std::vector<int32_t>>();
  SchedulerLimits limits = small_limits();
  limits.prefill_chunk_tokens = 3;
  limits.max_batch_tokens = 16;
  Engine e = make_engine(limits);
  {
    auto h =
        e.scheduler->submit(greedy_request("fox", fox_tokens(), static_cast<int64_t>(want.size())));
    REQUIRE(h.ok());
    const Outcome o = collect(h.value());
    REQUIRE(o.finals == 1);
    CHECK(o.tokens == want);
  }
  const auto& alone = alone_tokens();
  const auto together = run_together(*e.scheduler);
  for (size_t i = 0; i < together.size(); ++i) {
    INFO("request " << i);
    REQUIRE(together[i].finals == 1);
    CHECK(together[i].tokens == alone[i]);
  }
  e.scheduler->stop();
  CHECK(e.scheduler->kv_free_blocks() == e.scheduler->kv_total_blocks());
}

TEST_CASE(
    "scheduler: gpt-oss sliding-window layers (own rings, pool of full layers only) give "
    "llama.cpp's greedy tokens, batched and chunked",
    "[runtime][scheduler_loop][gpt-oss]") {
  const std::string dir = std::string(TANDEM_SHARED_DIR) + "/data/tiny-gpt-oss/";
  const auto ref = read_json(dir + "ref-all-f32.json");
  SchedulerLimits limits = small_limits();
  limits.prefill_chunk_tokens = 5;  // chunks end inside and across the window of 8
  limits.max_batch_tokens = 16;
  Engine e =
      make_engine(limits, /*kv_blocks=*/40, 64, false, true, {}, dir + "tiny-gpt-oss-all-f32.gguf");
  std::vector<RequestHandle> handles;
  std::vector<std::vector<int32_t>> want;
  for (const auto& p : ref["prompts"]) {
    want.push_back(p["greedy_tokens"].get<std::vector<int32_t>>());
    auto h = e.scheduler->submit(greedy_request(p["name"], p["tokens"].get<std::vector<int32_t>>(),
                                                static_cast<int64_t>(want.back().size())));
    REQUIRE(h.ok());
    handles.push_back(std::move(h).value());
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    INFO("prompt " << i);
    const Outcome o = collect(handles[i]);
    REQUIRE(o.finals == 1);
    CHECK(o.tokens == want[i]);
  }
  e.scheduler->stop();
  CHECK(e.scheduler->kv_free_blocks() == e.scheduler->kv_total_blocks());
}

TEST_CASE("scheduler: preemption and recompute give the uninterrupted tokens",
          "[runtime][scheduler_loop]") {
  // 6 blocks of 16 tokens: a few sequences at a time, growth forces preemptions.
  SchedulerLimits limits = small_limits();
  limits.context_length = 64;
  Engine e = make_engine(limits, /*kv_blocks=*/6);
  const auto& alone = alone_tokens();
  const auto together = run_together(*e.scheduler);
  for (size_t i = 0; i < together.size(); ++i) {
    INFO("request " << i);
    REQUIRE(together[i].finals == 1);
    CHECK(together[i].tokens == alone[i]);
  }
  CHECK(e.scheduler->preemptions() > 0);
  e.scheduler->stop();
  CHECK(e.scheduler->kv_free_blocks() == e.scheduler->kv_total_blocks());
  CHECK(e.scheduler->kv_check_invariants().ok());
}

TEST_CASE("scheduler: cancelling one request leaves the others unchanged",
          "[runtime][scheduler_loop]") {
  const auto& alone = alone_tokens();
  // The loop pauses after its second forward pass until the victim was cancelled, so the
  // cancellation lands mid-stream however fast the tiny model runs.
  std::promise<void> cancelled;
  std::shared_future<void> cancelled_future = cancelled.get_future().share();
  Engine e = make_engine(small_limits(), 0, 64, false, true, [cancelled_future](int64_t step) {
    if (step == 2) cancelled_future.wait();
  });
  const auto prompts = prompts16();
  auto victim = e.scheduler->submit(greedy_request("victim", prompts[5], 80));
  REQUIRE(victim.ok());
  std::vector<RequestHandle> others;
  for (size_t i = 0; i < 4; ++i) {
    auto h = e.scheduler->submit(greedy_request("o" + std::to_string(i), prompts[i], kGenTokens));
    REQUIRE(h.ok());
    others.push_back(std::move(h).value());
  }
  auto first =
      victim.value().next(std::chrono::duration_cast<std::chrono::milliseconds>(kEventTimeout));
  REQUIRE(first.has_value());
  REQUIRE_FALSE(first->is_final);
  victim.value().cancel();
  cancelled.set_value();
  Outcome v = collect(victim.value());
  v.tokens.insert(v.tokens.begin(), first->token_ids.begin(), first->token_ids.end());
  REQUIRE(v.finals == 1);
  CHECK(v.reason == FinishReason::kAbort);
  CHECK(v.tokens.size() <= 3);  // at most one step ran after the pause
  CHECK(v.usage.completion_tokens == static_cast<int64_t>(v.tokens.size()));
  for (size_t i = 0; i < others.size(); ++i) {
    INFO("request " << i);
    const Outcome o = collect(others[i]);
    REQUIRE(o.finals == 1);
    CHECK(o.reason == FinishReason::kLength);
    CHECK(o.tokens == alone[i]);
  }
  e.scheduler->stop();
  CHECK(e.scheduler->kv_free_blocks() == e.scheduler->kv_total_blocks());
}

TEST_CASE("scheduler: a passed deadline ends the request with a deadline event",
          "[runtime][scheduler_loop]") {
  Engine e = make_engine(small_limits());
  Request late = greedy_request("late", fox_tokens(), kGenTokens);
  late.deadline = Clock::now() - std::chrono::milliseconds(1);
  auto h = e.scheduler->submit(late);
  REQUIRE(h.ok());
  auto ok = e.scheduler->submit(greedy_request("ontime", fox_tokens(), 4));
  REQUIRE(ok.ok());
  const Outcome o = collect(h.value());
  REQUIRE(o.finals == 1);
  CHECK(o.reason == FinishReason::kDeadline);
  CHECK(o.error.code() == StatusCode::kDeadlineExceeded);
  CHECK(o.tokens.empty());
  const Outcome o2 = collect(ok.value());
  REQUIRE(o2.finals == 1);
  CHECK(o2.reason == FinishReason::kLength);
  CHECK(o2.tokens.size() == 4);
  e.scheduler->stop();
}

TEST_CASE("scheduler: a deadline passing mid-stream ends the running request",
          "[runtime][scheduler_loop]") {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(300);
  // The loop pauses after its second forward pass until the deadline has passed.
  Engine e = make_engine(small_limits(), 0, 64, false, true, [deadline](int64_t step) {
    if (step == 2) std::this_thread::sleep_until(deadline + std::chrono::milliseconds(1));
  });
  Request r = greedy_request("running", fox_tokens(), 80);
  r.deadline = deadline;
  auto h = e.scheduler->submit(r);
  REQUIRE(h.ok());
  const Outcome o = collect(h.value());
  REQUIRE(o.finals == 1);
  CHECK(o.reason == FinishReason::kDeadline);
  CHECK(o.error.code() == StatusCode::kDeadlineExceeded);
  CHECK(o.tokens.size() <= 2);
  CHECK(o.usage.completion_tokens == static_cast<int64_t>(o.tokens.size()));
  e.scheduler->stop();
  CHECK(e.scheduler->kv_free_blocks() == e.scheduler->kv_total_blocks());
}

TEST_CASE("scheduler: with a tokenizer, events carry text and stop strings end the output",
          "[runtime][scheduler_loop]") {
  const auto ref = read_json(tiny_moe_dir() + "ref-f32.json");
  const auto& fox = ref["prompts"][0];
  const auto want = fox["greedy_tokens"].get<std::vector<int32_t>>();
  const std::string want_text = fox["greedy_text_lossy"].get<std::string>();
  Engine e = make_engine(small_limits(), 0, 64, /*with_tokenizer=*/true);
  auto plain =
      e.scheduler->submit(greedy_request("plain", fox_tokens(), static_cast<int64_t>(want.size())));
  REQUIRE(plain.ok());
  const Outcome p = collect(plain.value());
  REQUIRE(p.finals == 1);
  CHECK(p.tokens == want);
  CHECK(p.text == want_text);

  // llama.cpp's greedy text is " sub orderann should..."; "ann" comes within the third token.
  Request r = greedy_request("stopped", fox_tokens(), static_cast<int64_t>(want.size()));
  r.sampling.stop = {"ann"};
  auto stopped = e.scheduler->submit(r);
  REQUIRE(stopped.ok());
  const Outcome s = collect(stopped.value());
  REQUIRE(s.finals == 1);
  CHECK(s.reason == FinishReason::kStop);
  const size_t at = want_text.find("ann");
  REQUIRE(at != std::string::npos);
  CHECK(s.text == want_text.substr(0, at));
  CHECK(s.tokens.size() < want.size());
  e.scheduler->stop();
}

TEST_CASE("scheduler: submission checks and stop(kAbort)", "[runtime][scheduler_loop]") {
  Engine e = make_engine(small_limits());
  // Beyond the context (128): rejected at submission.
  auto too_long = e.scheduler->submit(greedy_request("long", fox_tokens(), 200));
  CHECK(too_long.status().code() == StatusCode::kInvalidArgument);
  auto bad_id = e.scheduler->submit(greedy_request("bad", {1, 999999}, 4));
  CHECK(bad_id.status().code() == StatusCode::kInvalidArgument);
  Request with_stop = greedy_request("stop", fox_tokens(), 4);
  with_stop.sampling.stop = {"x"};
  CHECK(e.scheduler->submit(with_stop).status().code() == StatusCode::kInvalidArgument);

  std::vector<RequestHandle> handles;
  for (int i = 0; i < 6; ++i) {
    auto h = e.scheduler->submit(greedy_request("a" + std::to_string(i), fox_tokens(), 100));
    REQUIRE(h.ok());
    handles.push_back(std::move(h).value());
  }
  e.scheduler->stop(StopMode::kAbort);
  for (auto& h : handles) {
    const Outcome o = collect(h);
    REQUIRE(o.finals == 1);
    // The tiny model may finish a request before the stop arrives.
    CHECK((o.reason == FinishReason::kAbort || o.reason == FinishReason::kLength));
  }
  CHECK(e.scheduler->submit(greedy_request("after", fox_tokens(), 4)).status().code() ==
        StatusCode::kUnavailable);
  CHECK(e.scheduler->kv_free_blocks() == e.scheduler->kv_total_blocks());
}

// The prompt logprobs of one request, how many events carried them and how many token ids came
// before the one that did.
struct PromptLogprobsSeen {
  std::vector<TokenLogprobs> values;
  int events_with_them = 0;
  size_t tokens_before = 0;
};

PromptLogprobsSeen prompt_logprobs_of(Scheduler& scheduler, const Request& request) {
  auto h = scheduler.submit(request);
  REQUIRE(h.ok());
  PromptLogprobsSeen seen;
  size_t tokens = 0;
  while (!h->done()) {
    auto ev = h->next(std::chrono::duration_cast<std::chrono::milliseconds>(kEventTimeout));
    REQUIRE(ev.has_value());
    if (ev->prompt_logprobs.has_value()) {
      ++seen.events_with_them;
      seen.values = *ev->prompt_logprobs;
      seen.tokens_before = tokens;
    }
    tokens += ev->token_ids.size();
    CHECK(ev->logprobs.size() ==
          (request.sampling.logprobs.has_value() ? ev->token_ids.size() : size_t{0}));
  }
  return seen;
}

// The tiny model's 64-token reference prompt.
std::vector<int32_t> long_prompt() {
  const auto ref = read_json(tiny_moe_dir() + "ref-f32.json");
  return ref["prompts"][2]["tokens"].get<std::vector<int32_t>>();
}

Outcome run_one(Scheduler& scheduler, Request request) {
  auto h = scheduler.submit(std::move(request));
  REQUIRE(h.ok());
  Outcome o = collect(h.value());
  REQUIRE(o.finals == 1);
  return o;
}

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

TEST_CASE("scheduler: prompt logprobs come once, before the first token, chunked or not",
          "[runtime][scheduler_loop]") {
  Request r = greedy_request("p", fox_tokens(), 3);
  r.sampling.prompt_logprobs = 3;
  r.sampling.logprobs = 1;
  Engine whole = make_engine(small_limits());
  const PromptLogprobsSeen a = prompt_logprobs_of(*whole.scheduler, r);
  SchedulerLimits chunked = small_limits();
  chunked.prefill_chunk_tokens = 5;
  Engine parts = make_engine(chunked);
  const PromptLogprobsSeen b = prompt_logprobs_of(*parts.scheduler, r);
  for (const PromptLogprobsSeen* seen : {&a, &b}) {
    CHECK(seen->events_with_them == 1);
    CHECK(seen->tokens_before == 0);
    REQUIRE(seen->values.size() == fox_tokens().size() - 1);
  }
  for (size_t i = 0; i < a.values.size(); ++i) {
    INFO("prompt token " << i + 1);
    CHECK(a.values[i].logprob <= 0.0f);
    CHECK(b.values[i].logprob == Approx(a.values[i].logprob).margin(1e-4));
    CHECK(b.values[i].top_ids == a.values[i].top_ids);
    CHECK(a.values[i].top_ids.size() == 3);
  }
  // Without prompt_logprobs no event carries them.
  Request plain = greedy_request("q", fox_tokens(), 2);
  CHECK(prompt_logprobs_of(*whole.scheduler, plain).events_with_them == 0);
  whole.scheduler->stop();
  parts.scheduler->stop();
}

TEST_CASE("scheduler: a failed weights check discards the pass and fails every request",
          "[runtime][scheduler_loop]") {
  std::atomic<int> checks{0};
  const auto check = [&checks]() -> Status {
    if (checks.fetch_add(1) < 3) return Status();
    return data_loss_error("m.gguf changed on disk while being served");
  };
  Engine e = make_engine(small_limits(), 0, 64, false, /*start=*/false, {},
                         tiny_moe_dir() + "tiny-moe-f32.gguf", check);
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 4; ++i) {
    auto h = e.scheduler->submit(greedy_request("w" + std::to_string(i), fox_tokens(), 60));
    REQUIRE(h.ok());
    handles.push_back(std::move(h).value());
  }
  REQUIRE(e.scheduler->start().ok());
  for (auto& h : handles) {
    const Outcome o = collect(h);
    REQUIRE(o.finals == 1);
    CHECK(o.reason == FinishReason::kError);
    CHECK(o.error.code() == StatusCode::kDataLoss);
    // Passes 1-3 were checked fine (prefill, then 2 tokens); the 4th pass's token is discarded.
    CHECK(o.tokens.size() == 3);
  }
  const auto after = e.scheduler->submit(greedy_request("after", fox_tokens(), 4));
  CHECK(after.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(after.status().message(),
             Catch::Contains("stopped serving its model: m.gguf changed on disk"));
  CHECK(e.scheduler->failure().code() == StatusCode::kDataLoss);
  CHECK(e.scheduler->in_flight() == 0);
  e.scheduler->stop();
  CHECK(e.scheduler->kv_free_blocks() == e.scheduler->kv_total_blocks());
}

TEST_CASE("scheduler: fail() from another thread ends running requests and refuses new ones",
          "[runtime][scheduler_loop]") {
  Engine e = make_engine(small_limits());
  CHECK(e.scheduler->failure().ok());
  auto h = e.scheduler->submit(greedy_request("long", fox_tokens(), 80));
  REQUIRE(h.ok());
  e.scheduler->fail(data_loss_error("first reason"));
  e.scheduler->fail(data_loss_error("second reason"));  // the first is kept
  const Outcome o = collect(h.value());
  REQUIRE(o.finals == 1);
  // The tiny model may finish before the failure is seen; it never runs on afterwards.
  CHECK((o.reason == FinishReason::kError || o.reason == FinishReason::kLength));
  if (o.reason == FinishReason::kError) CHECK(o.error.message() == "first reason");
  CHECK(e.scheduler->failure().message() == "first reason");
  CHECK(e.scheduler->submit(greedy_request("after", fox_tokens(), 4)).status().code() ==
        StatusCode::kUnavailable);
  e.scheduler->stop();
}

TEST_CASE("scheduler: stop(kAbort) before start ends every accepted request with abort",
          "[runtime][scheduler_loop]") {
  Engine e = make_engine(small_limits(), 0, 64, false, /*start=*/false);
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 3; ++i) {
    auto h = e.scheduler->submit(greedy_request("q" + std::to_string(i), fox_tokens(), 8));
    REQUIRE(h.ok());
    handles.push_back(std::move(h).value());
  }
  e.scheduler->stop(StopMode::kAbort);
  for (auto& h : handles) {
    const Outcome o = collect(h);
    REQUIRE(o.finals == 1);
    CHECK(o.reason == FinishReason::kAbort);
    CHECK(o.tokens.empty());
  }
}

TEST_CASE("scheduler: 64 concurrent requests with random cancellations",
          "[runtime][scheduler_loop]") {
  SchedulerLimits limits = small_limits();
  limits.max_running = 8;
  limits.max_batch_tokens = 64;
  limits.prefill_chunk_tokens = 16;
  limits.context_length = 64;
  Engine e = make_engine(limits, /*kv_blocks=*/10, /*capacity=*/64);
  const auto fox = fox_tokens();
  constexpr int kThreads = 4;
  constexpr int kPerThread = 16;
  std::vector<std::vector<Outcome>> results(kThreads);
  std::vector<int> submit_failures(kThreads, 0);
  std::vector<std::thread> clients;
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937 rng(1000 + t);
      std::vector<RequestHandle> handles;
      std::vector<int> policy;
      for (int i = 0; i < kPerThread; ++i) {
        std::vector<int32_t> prompt;
        const int len = 1 + static_cast<int>(rng() % 30);
        for (int j = 0; j < len; ++j) prompt.push_back(fox[rng() % fox.size()]);
        Request r = greedy_request(std::to_string(t) + "-" + std::to_string(i), prompt,
                                   1 + static_cast<int64_t>(rng() % 12));
        if (rng() % 2 == 0) {  // some sampled with a seed
          r.sampling.temperature = 0.8f;
          r.sampling.seed = rng();
        }
        auto h = e.scheduler->submit(r);
        if (!h.ok()) {
          ++submit_failures[t];
          continue;
        }
        const int p = static_cast<int>(rng() % 3);  // 0 run, 1 cancel now, 2 cancel mid-stream
        if (p == 1) h.value().cancel();
        handles.push_back(std::move(h).value());
        policy.push_back(p);
      }
      for (size_t i = 0; i < handles.size(); ++i) {
        results[t].push_back(collect(handles[i], policy[i] == 2));
      }
    });
  }
  for (auto& c : clients) c.join();
  int total = 0;
  int aborted = 0;
  for (int t = 0; t < kThreads; ++t) {
    CHECK(submit_failures[t] == 0);
    for (const Outcome& o : results[t]) {
      ++total;
      CHECK_FALSE(o.timed_out);
      CHECK(o.finals == 1);
      if (o.reason == FinishReason::kAbort) ++aborted;
      CHECK(o.usage.completion_tokens == static_cast<int64_t>(o.tokens.size()));
    }
  }
  CHECK(total == kThreads * kPerThread);
  CHECK(aborted > 0);
  e.scheduler->stop();
  CHECK(e.scheduler->kv_free_blocks() == e.scheduler->kv_total_blocks());
  CHECK(e.scheduler->kv_check_invariants().ok());
}

// Records what the scheduler tells a routing observer (scheduler thread only; read after stop()).
class RecordingObserver final : public RoutingObserver {
 public:
  void on_forward(std::span<const experts::Routing> routing,
                  std::span<const RoutedToken> tokens) override {
    (void)routing;
    (void)tokens;
    ++forwards;
    seconds_pending = true;
  }
  void on_expert_seconds(std::span<const double> seconds_per_worker) override {
    ++seconds_calls;
    right_after_forward = right_after_forward && seconds_pending;
    seconds_pending = false;
    sizes_ok = sizes_ok && seconds_per_worker.size() == 2;
    for (size_t w = 0; w < seconds_per_worker.size() && w < 2; ++w) {
      total[w] += seconds_per_worker[w];
    }
  }

  int64_t forwards = 0;
  int64_t seconds_calls = 0;
  bool seconds_pending = false;
  bool right_after_forward = true;
  bool sizes_ok = true;
  double total[2] = {0.0, 0.0};
};

TEST_CASE("scheduler: each pass's expert worker seconds reach the routing observer",
          "[runtime][scheduler_loop]") {
  auto model = load_model(tiny_moe_dir() + "tiny-moe-f32.gguf", 2);
  ModelRunner& runner = *model->runner;
  const model::ModelSpec& spec = runner.spec();
  // A second CPU worker on a pool of its own runs on a helper thread, concurrently with worker 0.
  ThreadPool second_pool(1);
  auto second = experts::CpuExpertWorker::create(spec, *model->checkpoint.weights, &second_pool,
                                                 kernels::MatmulActivations::kQuantized);
  REQUIRE(second.ok());
  experts::ExpertMap map = experts::ExpertMap::uniform(spec.n_layers, spec.n_experts, 0);
  for (size_t l = 0; l < spec.n_layers; ++l) {
    for (size_t e = 0; e < spec.n_experts; e += 2) map.set(l, e, 1);
  }
  REQUIRE(runner.set_expert_workers({&runner.cpu_worker(), second->get()}, map).ok());

  RecordingObserver observer;
  SchedulerOptions options;
  options.limits = small_limits();
  options.routing_observer = &observer;
  auto created = Scheduler::create(std::move(model->runner), options);
  REQUIRE(created.ok());
  std::unique_ptr<Scheduler> scheduler = std::move(created).value();
  REQUIRE(scheduler->start().ok());
  auto h = scheduler->submit(greedy_request("timed", fox_tokens(), 4));
  REQUIRE(h.ok());
  const Outcome o = collect(h.value());
  REQUIRE(o.finals == 1);
  CHECK(o.reason == FinishReason::kLength);
  scheduler->stop();  // joins the loop: the observer's fields are ours now
  const int64_t steps = scheduler->load().steps;
  CHECK(steps >= 2);  // the prefill, then decode passes
  scheduler.reset();  // before the workers it uses go away

  CHECK(observer.forwards == steps);
  CHECK(observer.seconds_calls == observer.forwards);
  CHECK(observer.right_after_forward);
  CHECK(observer.sizes_ok);
  CHECK(observer.total[0] > 0.0);
  CHECK(observer.total[1] > 0.0);
}

}  // namespace
}  // namespace tandem::runtime
