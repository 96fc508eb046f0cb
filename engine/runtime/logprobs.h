// Log probabilities of sampled tokens (OpenAI `logprobs` / `top_logprobs`, the vLLM protocol's
// `logprobs`): computed from the model's raw logits, before any sampling processor (penalties,
// logit bias, temperature, top-k/p, min-p), as vLLM returns them by default.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tandem::runtime {

// The most alternatives one token may carry (the OpenAI API's top_logprobs bound).
inline constexpr int64_t kMaxTopLogprobs = 20;

struct TokenLogprobs {
  float logprob = 0.0f;          // natural log of the token's probability
  std::vector<int32_t> top_ids;  // the `top` most probable tokens, most probable first
  std::vector<float> top_logprobs;

  friend bool operator==(const TokenLogprobs&, const TokenLogprobs&) = default;
};

// log softmax(logits)[token] and the `top` (0..kMaxTopLogprobs) largest entries, ties broken by
// the lower id. Non-finite logits count as -inf (probability 0); a row with no finite logit gives
// -inf everywhere. The sum is taken in double around the row's maximum. `token` must index
// `logits`. Pure.
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int64_t top);

}  // namespace tandem::runtime
