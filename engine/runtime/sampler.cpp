// Sampler and the logits filters it applies, in the order documented in sampler.h.
#include "engine/runtime/sampler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace tandem::runtime {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool is_live(float logit) {
  return logit > kNegInf;
}  // false for -inf and NaN

// NaN → -inf, +inf → the largest finite float.
void sanitize(std::span<float> logits) {
  for (float& l : logits) {
    if (std::isnan(l)) {
      l = kNegInf;
    } else if (l == std::numeric_limits<float>::infinity()) {
      l = std::numeric_limits<float>::max();
    }
  }
}

float max_logit(std::span<const float> logits) {
  float best = kNegInf;
  for (float l : logits) best = std::max(best, l);
  return best;
}

// Fills `ids` with the indices of the live logits.
void live_ids(std::span<const float> logits, std::vector<int32_t>& ids) {
  ids.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (is_live(logits[i])) ids.push_back(static_cast<int32_t>(i));
  }
}

uint64_t fresh_seed() {
  try {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  } catch (...) {  // no entropy source: the clock is good enough for an unseeded request
    return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
}

}  // namespace

void apply_logit_bias(std::span<float> logits, const std::map<int32_t, float>& bias) {
  for (const auto& [id, value] : bias) {
    if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[id] += value;
  }
}

void apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> unique_ids,
                              float penalty) {
  if (penalty == 1.0f) return;
  for (int32_t id : unique_ids) {
    float& l = logits[static_cast<size_t>(id)];
    l = l < 0.0f ? l * penalty : l / penalty;
  }
}

void apply_presence_frequency_penalty(std::span<float> logits, std::span<const TokenCount> counts,
                                      float presence, float frequency) {
  if (presence == 0.0f && frequency == 0.0f) return;
  for (const TokenCount& entry : counts) {
    float& l = logits[static_cast<size_t>(entry.id)];
    l -= frequency * static_cast<float>(entry.count);
    if (entry.count > 0) l -= presence;
  }
}

void apply_temperature(std::span<float> logits, float temperature) {
  if (temperature == 1.0f) return;
  for (float& l : logits) l = l / temperature;
}

void apply_top_k(std::span<float> logits, int64_t k, std::vector<int32_t>& scratch) {
  if (k <= 0) return;
  live_ids(logits, scratch);
  if (k >= static_cast<int64_t>(scratch.size())) return;
  auto kth = scratch.begin() + (k - 1);
  std::nth_element(scratch.begin(), kth, scratch.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const float threshold = logits[*kth];
  for (float& l : logits) {
    if (l < threshold) l = kNegInf;
  }
}

void apply_top_p(std::span<float> logits, float top_p, std::vector<int32_t>& scratch) {
  if (!(top_p < 1.0f)) return;
  live_ids(logits, scratch);
  const size_t n = scratch.size();
  if (n <= 1) return;
  const float top = max_logit(logits);
  double total = 0.0;
  for (int32_t id : scratch) total += std::exp(static_cast<double>(logits[id]) - top);
  const double mass = static_cast<double>(top_p) * total;
  auto descending = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };

  size_t keep = n;
  for (size_t m = std::min<size_t>(n, 64);; m = std::min(n, m * 4)) {
    if (m < n) std::nth_element(scratch.begin(), scratch.begin() + m, scratch.end(), descending);
    std::sort(scratch.begin(), scratch.begin() + m, descending);
    double above = 0.0;  // mass of the tokens ranked before position i
    size_t i = 0;
    for (; i < m; ++i) {
      if (above >= mass) break;
      above += std::exp(static_cast<double>(logits[scratch[i]]) - top);
    }
    if (i < m || m == n) {
      keep = std::max<size_t>(i, 1);
      break;
    }
  }
  for (size_t j = keep; j < n; ++j) logits[scratch[j]] = kNegInf;
}

void apply_min_p(std::span<float> logits, float min_p) {
  if (!(min_p > 0.0f)) return;
  const float top = max_logit(logits);
  if (!is_live(top)) return;
  for (float& l : logits) {
    if (is_live(l) && std::exp(static_cast<double>(l) - top) < static_cast<double>(min_p)) {
      l = kNegInf;
    }
  }
}

bool softmax(std::span<const float> logits, std::span<double> probs) {
  const float top = max_logit(logits);
  if (!is_live(top)) {
    std::fill(probs.begin(), probs.end(), 0.0);
    return false;
  }
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    probs[i] = is_live(logits[i]) ? std::exp(static_cast<double>(logits[i]) - top) : 0.0;
    total += probs[i];
  }
  for (double& p : probs) p /= total;
  return true;
}

int32_t argmax(std::span<const float> logits) {
  int32_t best = -1;
  float best_value = kNegInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best_value) {  // strict: the lowest id wins a tie
      best_value = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

double uniform_from_bits(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

int32_t draw_token(std::span<const float> logits, double u, std::vector<double>& scratch) {
  scratch.resize(logits.size());
  if (!softmax(logits, scratch)) return -1;
  double cumulative = 0.0;
  int32_t last_live = -1;
  for (size_t i = 0; i < scratch.size(); ++i) {
    if (scratch[i] <= 0.0) continue;
    cumulative += scratch[i];
    last_live = static_cast<int32_t>(i);
    if (cumulative > u) return last_live;
  }
  return last_live;  // rounding left the total just below u
}

Sampler::Sampler(const SamplingParams& params, int32_t n_vocab,
                 std::span<const int32_t> prompt_tokens, std::span<const int32_t> eos_token_ids)
    : params_(params),
      n_vocab_(n_vocab),
      rng_(params.seed.has_value() ? *params.seed : fresh_seed()) {
  for (int32_t id : eos_token_ids) {
    if (id >= 0 && id < n_vocab_) eos_token_ids_.push_back(id);
  }
  if (params_.repetition_penalty != 1.0f) {
    seen_mask_.assign(static_cast<size_t>(std::max(n_vocab_, 0)), false);
    for (int32_t id : prompt_tokens) {
      if (id >= 0 && id < n_vocab_ && !seen_mask_[id]) {
        seen_mask_[id] = true;
        seen_ids_.push_back(id);
      }
    }
  }
}

void Sampler::record_output(int32_t token) {
  ++output_count_;
  if (token < 0 || token >= n_vocab_) return;
  if (!seen_mask_.empty() && !seen_mask_[token]) {
    seen_mask_[token] = true;
    seen_ids_.push_back(token);
  }
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    auto [it, inserted] = output_index_.try_emplace(token, output_counts_.size());
    if (inserted) output_counts_.push_back(TokenCount{token, 0});
    ++output_counts_[it->second].count;
  }
}

void Sampler::mask_stop_tokens(std::span<float> logits) const {
  if (output_count_ >= params_.min_tokens) return;
  if (!params_.ignore_eos) {
    for (int32_t id : eos_token_ids_) logits[id] = kNegInf;
  }
  for (int32_t id : params_.stop_token_ids) {
    if (id >= 0 && id < n_vocab_) logits[id] = kNegInf;
  }
}

Result<int32_t> Sampler::sample(std::span<const float> logits) {
  if (logits.size() != static_cast<size_t>(n_vocab_)) {
    return invalid_argument_error("logits row has " + std::to_string(logits.size()) +
                                  " entries, the vocabulary " + std::to_string(n_vocab_));
  }
  work_.assign(logits.begin(), logits.end());
  std::span<float> row(work_);
  sanitize(row);
  mask_stop_tokens(row);
  apply_logit_bias(row, params_.logit_bias);
  apply_repetition_penalty(row, seen_ids_, params_.repetition_penalty);
  apply_presence_frequency_penalty(row, output_counts_, params_.presence_penalty,
                                   params_.frequency_penalty);

  int32_t token = -1;
  if (params_.is_greedy()) {
    token = argmax(row);
  } else {
    apply_temperature(row, params_.temperature);
    sanitize(row);  // dividing by a small temperature can overflow to +inf
    apply_top_k(row, params_.top_k, index_scratch_);
    apply_top_p(row, params_.top_p, index_scratch_);
    apply_min_p(row, params_.min_p);
    token = draw_token(row, uniform_from_bits(rng_()), prob_scratch_);
  }
  if (token < 0) {
    return failed_precondition_error("no token can be sampled: every logit is -inf or NaN");
  }
  record_output(token);
  return token;
}

}  // namespace tandem::runtime
