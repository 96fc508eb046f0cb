// log-softmax of one logits row and its top entries.
#include "engine/runtime/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "base/check.h"

namespace tandem::runtime {
namespace {

float finite_or_minus_inf(float x) {
  return std::isfinite(x) ? x : -std::numeric_limits<float>::infinity();
}

}  // namespace

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int64_t top) {
  TANDEM_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size());
  TANDEM_CHECK(top >= 0 && top <= kMaxTopLogprobs);
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  float max = kMinusInf;
  for (const float x : logits) max = std::max(max, finite_or_minus_inf(x));
  TokenLogprobs out;
  if (max == kMinusInf) {
    out.logprob = kMinusInf;
  } else {
    double sum = 0.0;
    for (const float x : logits) {
      const float v = finite_or_minus_inf(x);
      if (v != kMinusInf) sum += std::exp(static_cast<double>(v) - max);
    }
    const double log_z = static_cast<double>(max) + std::log(sum);
    const auto logprob = [&](int32_t id) {
      const float v = finite_or_minus_inf(logits[static_cast<size_t>(id)]);
      return v == kMinusInf ? kMinusInf : static_cast<float>(static_cast<double>(v) - log_z);
    };
    out.logprob = logprob(token);
    // The top entries by one pass with a small sorted buffer (top <= 20).
    std::vector<std::pair<float, int32_t>> best;  // (logit, id), best first
    best.reserve(static_cast<size_t>(top) + 1);
    const auto better = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    for (size_t i = 0; i < logits.size() && top > 0; ++i) {
      const std::pair<float, int32_t> entry{finite_or_minus_inf(logits[i]),
                                            static_cast<int32_t>(i)};
      if (static_cast<int64_t>(best.size()) == top && !better(entry, best.back())) continue;
      best.insert(std::upper_bound(best.begin(), best.end(), entry, better), entry);
      if (static_cast<int64_t>(best.size()) > top) best.pop_back();
    }
    for (const auto& [logit, id] : best) {
      out.top_ids.push_back(id);
      out.top_logprobs.push_back(logprob(id));
    }
    return out;
  }
  // No finite logit: every probability is 0; the top entries are the lowest ids.
  for (int64_t i = 0; i < top && static_cast<size_t>(i) < logits.size(); ++i) {
    out.top_ids.push_back(static_cast<int32_t>(i));
    out.top_logprobs.push_back(kMinusInf);
  }
  return out;
}

}  // namespace tandem::runtime
