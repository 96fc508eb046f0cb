// SamplingParams: how one request picks its tokens and when it stops (engine type, no gRPC).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace tandem::runtime {

// Bounds that validate() checks against. n_vocab and max_tokens_cap come from the loaded model and
// the configuration; the other caps have safe defaults (hardening rows B5-B9).
struct SamplingLimits {
  int64_t n_vocab = 0;                    // token ids must be in [0, n_vocab)
  int64_t max_tokens_cap = 0;             // max_tokens must be in [1, max_tokens_cap]
  int64_t max_stop_strings = 16;          // entries in `stop`
  int64_t max_stop_string_bytes = 256;    // bytes in each stop string
  int64_t max_stop_token_ids = 256;       // entries in `stop_token_ids`
  int64_t max_logit_bias_entries = 1024;  // entries in `logit_bias`
};

// Below this temperature sampling is greedy (argmax); dividing logits by a smaller number would
// overflow float. The same threshold as vLLM's sampling epsilon.
inline constexpr float kGreedyTemperature = 1e-5f;
// Bounds of the OpenAI-style knobs.
inline constexpr float kMaxAbsPenalty = 2.0f;      // presence_penalty, frequency_penalty
inline constexpr float kMaxAbsLogitBias = 100.0f;  // each logit_bias value

// Value type. The wire layer fills it (mapping proto defaults such as top_p = 0 → 1 before), then
// calls validate(); the sampler and stop conditions assume a validated value.
struct SamplingParams {
  float temperature = 1.0f;             // 0 (any value < kGreedyTemperature): greedy argmax
  int64_t top_k = 0;                    // 0 or -1: off; >= n_vocab behaves as off
  float top_p = 1.0f;                   // in (0, 1]; 1: off
  float min_p = 0.0f;                   // in [0, 1]; 0: off
  float repetition_penalty = 1.0f;      // > 0; 1: off. HF/CTRL: over prompt + output tokens
  float presence_penalty = 0.0f;        // [-2, 2]; OpenAI: over output tokens
  float frequency_penalty = 0.0f;       // [-2, 2]; OpenAI: over output tokens
  std::map<int32_t, float> logit_bias;  // token id → additive bias in [-100, 100]
  std::optional<uint64_t> seed;         // set: the same seed and logits give the same tokens
  std::optional<int64_t> max_tokens;    // unset: up to the context limit
  int64_t min_tokens = 0;  // EOS, stop ids and stop strings cannot end the output before this
  std::vector<std::string> stop;            // stop strings, matched on the detokenized output
  std::vector<int32_t> stop_token_ids;      // tokens that end the output (besides EOS)
  bool ignore_eos = false;                  // EOS does not end the output (and is not masked)
  bool include_stop_str_in_output = false;  // the matched stop string / stop token text is kept
  // Set: every output token carries its log probability and this many top alternatives
  // (0..kMaxTopLogprobs), from the raw logits (logprobs.h).
  std::optional<int64_t> logprobs;
  // Set: every prompt token but the first carries its log probability given the tokens before it
  // and this many top alternatives (0..kMaxTopLogprobs), sent once before the first output token.
  std::optional<int64_t> prompt_logprobs;

  bool is_greedy() const { return temperature < kGreedyTemperature; }

  // OK, or INVALID_ARGUMENT whose message names the parameter, the bound and the value, e.g.
  // "top_p must be in (0, 1], got 1.5". Never aborts, whatever the values.
  Status validate(const SamplingLimits& limits) const;
};

}  // namespace tandem::runtime
