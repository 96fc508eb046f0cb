// RoPE scalar reference: per-pair tables once per call, cos/sin per token, then every head.
#include "kernels/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "base/check.h"

namespace tandem::kernels {

RopeYarnCorrDims rope_yarn_corr_dims(size_t rot_dims, size_t n_ctx_orig, float freq_base,
                                     float beta_fast, float beta_slow, bool round) {
  TANDEM_CHECK(rot_dims > 0 && n_ctx_orig > 0 && freq_base > 1.0f);
  TANDEM_CHECK(beta_fast > 0.0f && beta_slow > 0.0f);
  const double n_dims = static_cast<double>(rot_dims);
  const double two_ln_base = 2.0 * std::log(static_cast<double>(freq_base));
  const auto corr_dim = [&](float beta) {
    const double n_rot = static_cast<double>(beta) * 2.0 * std::numbers::pi;
    return n_dims * std::log(static_cast<double>(n_ctx_orig) / n_rot) / two_ln_base;
  };
  RopeYarnCorrDims dims;
  const double low = round ? std::floor(corr_dim(beta_fast)) : corr_dim(beta_fast);
  const double high = round ? std::ceil(corr_dim(beta_slow)) : corr_dim(beta_slow);
  dims.low = static_cast<float>(std::max(0.0, low));
  dims.high = static_cast<float>(std::min(n_dims - 1.0, high));
  return dims;
}

void rope(std::span<float> x, size_t n_tokens, size_t n_heads, std::span<const int32_t> positions,
          const RopeConfig& config) {
  const size_t head_dim = config.head_dim;
  const size_t rot = config.rot_dims;
  TANDEM_CHECK(rot > 0 && rot % 2 == 0 && rot <= head_dim);
  TANDEM_CHECK(x.size() == n_tokens * n_heads * head_dim);
  TANDEM_CHECK(positions.size() == n_tokens);
  TANDEM_CHECK(config.freq_scale > 0.0f);
  const size_t half = rot / 2;
  const float freq_scale = config.freq_scale;
  const bool yarn = config.ext_factor != 0.0f;
  double mscale = static_cast<double>(config.attn_factor);
  // Per-pair tables, once per call: inv_freq, and YaRN's mix and 1 - mix.
  thread_local std::vector<float> inv_freq, mix, keep, cos_t, sin_t;
  inv_freq.resize(half);
  cos_t.resize(half);
  sin_t.resize(half);
  for (size_t i = 0; i < half; ++i) {
    const double exponent = -2.0 * static_cast<double>(i) / static_cast<double>(rot);
    inv_freq[i] = static_cast<float>(std::pow(static_cast<double>(config.freq_base), exponent));
  }
  if (yarn) {
    const RopeYarnCorrDims dims =
        rope_yarn_corr_dims(rot, config.n_ctx_orig, config.freq_base, config.beta_fast,
                            config.beta_slow, config.yarn_round_corr_dims);
    mix.resize(half);
    keep.resize(half);
    for (size_t i = 0; i < half; ++i) {
      const float y = (static_cast<float>(i) - dims.low) / std::max(0.001f, dims.high - dims.low);
      const float ramp = 1.0f - std::min(1.0f, std::max(0.0f, y));
      mix[i] = ramp * config.ext_factor;
      keep[i] = 1.0f - mix[i];
    }
    mscale *= 1.0 + 0.1 * std::log(1.0 / static_cast<double>(freq_scale));
  }
  const bool neox = config.layout == RopeLayout::kNeox;
  for (size_t t = 0; t < n_tokens; ++t) {
    const float pos = static_cast<float>(positions[t]);
    for (size_t i = 0; i < half; ++i) {
      const float theta_e = pos * inv_freq[i];
      const float theta_i = freq_scale * theta_e;
      const float theta = yarn ? theta_i * keep[i] + theta_e * mix[i] : theta_i;
      cos_t[i] = static_cast<float>(std::cos(static_cast<double>(theta)) * mscale);
      sin_t[i] = static_cast<float>(std::sin(static_cast<double>(theta)) * mscale);
    }
    for (size_t h = 0; h < n_heads; ++h) {
      float* head = x.data() + (t * n_heads + h) * head_dim;
      for (size_t i = 0; i < half; ++i) {
        float& a = head[neox ? i : 2 * i];
        float& b = head[neox ? i + half : 2 * i + 1];
        const float a0 = a;
        const float b0 = b;
        a = a0 * cos_t[i] - b0 * sin_t[i];
        b = a0 * sin_t[i] + b0 * cos_t[i];
      }
    }
  }
}

}  // namespace tandem::kernels
