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
#include "tests/runtime/scheduler_engine.h"

namespace tandem::runtime {
namespace {

using namespace testing;  // NOLINT: the engine-loop test helpers

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
