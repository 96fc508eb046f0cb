// Sampler: picks one sequence's next token from a logits row (penalties, filters, seeded draw).
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "engine/runtime/sampling_params.h"

namespace tandem::runtime {

// The order of the steps, in Sampler::sample and for anyone combining the filters below:
//
//   1. sanitize     NaN → -inf, +inf → the largest float (a broken row must not poison softmax)
//   2. min_tokens   while fewer than min_tokens tokens were produced, EOS (unless ignore_eos) and
//                   stop_token_ids get -inf, so the output cannot end early
//   3. logit_bias   additive, as the client wrote it (OpenAI: bias is added to the raw logits)
//   4. penalties    repetition (HF/CTRL, prompt + output), then frequency, then presence (OpenAI,
//                   output only); all act on raw logits, before temperature, as in HF and vLLM
//   5. greedy       temperature < kGreedyTemperature: argmax, lowest id on ties; stop here
//   6. temperature  logits / temperature
//   7. top_k        keep the k largest (every token tied with the k-th is kept, as HF does)
//   8. top_p        keep the smallest prefix, by descending probability, whose mass reaches top_p
//   9. min_p        drop tokens whose probability < min_p × the largest probability
//  10. draw         softmax over what is left, inverse CDF in token-id order with one uniform
//                   double made from one 64-bit output of std::mt19937_64
//
// 6-9 are the order of HF's generate() warpers (temperature, top-k, top-p, min-p); each filter
// takes the probabilities of what the previous one left, so the fixtures made with HF's warpers
// pin this order. Removed tokens are -inf, and every filter keeps at least one token.

// Adds bias[id] to logits[id]. Ids must be in range (validate() checks).
void apply_logit_bias(std::span<float> logits, const std::map<int32_t, float>& bias);

// HF/CTRL repetition penalty: for each id in `unique_ids` (no duplicates, all in range) a logit
// > 0 is divided by `penalty` and a logit < 0 is multiplied by it.
void apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> unique_ids,
                              float penalty);

struct TokenCount {
  int32_t id = 0;
  int32_t count = 0;  // > 0
};

// OpenAI penalties: logit[id] -= frequency × count, then -= presence (count > 0), per entry of
// `counts` (one entry per distinct output token).
void apply_presence_frequency_penalty(std::span<float> logits, std::span<const TokenCount> counts,
                                      float presence, float frequency);

// logits / temperature; temperature must be >= kGreedyTemperature.
void apply_temperature(std::span<float> logits, float temperature);

// Keeps the k largest logits (ties with the k-th kept); k <= 0 or k >= the number of finite
// logits is a no-op. `scratch` is reused working memory, contents unspecified afterwards.
void apply_top_k(std::span<float> logits, int64_t k, std::vector<int32_t>& scratch);

// Keeps a token when the probability mass of the tokens ranked strictly above it is < top_p;
// top_p >= 1 is a no-op. Sorts only as many tokens as it needs (grows the prefix ×4 at a time).
void apply_top_p(std::span<float> logits, float top_p, std::vector<int32_t>& scratch);

// Removes tokens whose probability is below min_p × the largest probability; min_p <= 0: no-op.
void apply_min_p(std::span<float> logits, float min_p);

// Softmax over the finite logits into `probs` (same size; -inf → 0). False when no logit is finite.
bool softmax(std::span<const float> logits, std::span<double> probs);

// Index of the largest logit, lowest index on ties; -1 when no logit is larger than -inf.
int32_t argmax(std::span<const float> logits);

// A double in [0, 1) from the top 53 bits of `bits` (portable, unlike
// std::uniform_real_distribution whose algorithm is implementation-defined).
double uniform_from_bits(uint64_t bits);

// Inverse-CDF draw: the first token id whose cumulative probability exceeds u (u in [0, 1)).
// -1 when no logit is finite. `scratch` is reused working memory.
int32_t draw_token(std::span<const float> logits, double u, std::vector<double>& scratch);

// One sequence's sampler: the validated params, its RNG and the token history the penalties need.
// Owned by the scheduler's entry for that sequence; one thread at a time (not synchronized).
class Sampler {
 public:
  // `params` must have passed validate() with n_vocab == this n_vocab (ids are trusted).
  // `prompt_tokens` feed the repetition penalty; `eos_token_ids` are masked while min_tokens is
  // not reached (unless ignore_eos). Ids outside [0, n_vocab) in both spans are ignored.
  Sampler(const SamplingParams& params, int32_t n_vocab, std::span<const int32_t> prompt_tokens,
          std::span<const int32_t> eos_token_ids);

  // Picks the next token from one logits row of n_vocab floats and records it as output.
  // Errors: INVALID_ARGUMENT if the row has the wrong size; FAILED_PRECONDITION if nothing can be
  // drawn (every logit -inf or NaN after masking). Advances the RNG exactly once per sampled
  // (non-greedy) token, so a seed reproduces the whole sequence.
  Result<int32_t> sample(std::span<const float> logits);

  // Records a token produced without sample() (e.g. a forced or restored token) for penalties.
  void record_output(int32_t token);

  int64_t output_count() const { return output_count_; }
  const SamplingParams& params() const { return params_; }

 private:
  void mask_stop_tokens(std::span<float> logits) const;

  SamplingParams params_;
  int32_t n_vocab_;
  std::vector<int32_t> eos_token_ids_;
  std::mt19937_64 rng_;
  int64_t output_count_ = 0;
  // Repetition penalty: distinct ids of prompt + output, with a membership mask.
  std::vector<int32_t> seen_ids_;
  std::vector<bool> seen_mask_;
  // Presence/frequency penalties: one entry per distinct output id, and its index.
  std::vector<TokenCount> output_counts_;
  std::unordered_map<int32_t, size_t> output_index_;
  // Working memory reused across calls.
  std::vector<float> work_;
  std::vector<int32_t> index_scratch_;
  std::vector<double> prob_scratch_;
};

}  // namespace tandem::runtime
