// Test helpers of the engine-loop tests: a Scheduler on the tiny F32 model, greedy requests and
// collecting their events, the reference prompts and the one-at-a-time reference tokens.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/runtime/scheduler.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/runtime/runtime_fixture.h"

namespace tandem::runtime::testing {

constexpr auto kEventTimeout = std::chrono::seconds(120);

struct Engine {
  std::unique_ptr<LoadedModel> model;               // outlives the scheduler (declared first)
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;  // likewise; may be null
  std::unique_ptr<Scheduler> scheduler;
};

inline SchedulerLimits small_limits() {
  SchedulerLimits limits;
  limits.max_batch_tokens = 256;
  limits.prefill_chunk_tokens = 256;
  limits.max_running = 16;
  limits.context_length = 128;
  return limits;
}

inline Engine make_engine(const SchedulerLimits& limits, int64_t kv_blocks = 0,
                          size_t capacity = 64, bool with_tokenizer = false, bool start = true,
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

inline Request greedy_request(const std::string& id, std::vector<int32_t> prompt,
                              int64_t max_tokens) {
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
inline Outcome collect(RequestHandle& handle, bool cancel_after_first = false) {
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

inline std::vector<int32_t> fox_tokens() {
  const auto ref = read_json(tiny_moe_dir() + "ref-f32.json");
  return ref["prompts"][0]["tokens"].get<std::vector<int32_t>>();
}

// 16 prompts of different lengths (2 .. 47 tokens) made from the fox prompt's ids.
inline std::vector<std::vector<int32_t>> prompts16() {
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
inline Engine make_uncached_engine(const SchedulerLimits& limits, int64_t kv_blocks = 0) {
  return make_engine(limits, kv_blocks, 64, false, true, {}, tiny_moe_dir() + "tiny-moe-f32.gguf",
                     {}, /*prefix_caching=*/false);
}

// Each of prompts16() run alone (one at a time) without the prefix cache, computed once.
inline const std::vector<std::vector<int32_t>>& alone_tokens() {
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
inline std::vector<Outcome> run_together(Scheduler& scheduler) {
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

// The tiny model's 64-token reference prompt.
inline std::vector<int32_t> long_prompt() {
  const auto ref = read_json(tiny_moe_dir() + "ref-f32.json");
  return ref["prompts"][2]["tokens"].get<std::vector<int32_t>>();
}

inline Outcome run_one(Scheduler& scheduler, Request request) {
  auto h = scheduler.submit(std::move(request));
  REQUIRE(h.ok());
  Outcome o = collect(h.value());
  REQUIRE(o.finals == 1);
  return o;
}

}  // namespace tandem::runtime::testing
