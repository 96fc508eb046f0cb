// RoPE scalar reference: cos/sin per token once, then every head of the token.
#include "kernels/cpu/rope.h"

#include <cmath>
#include <vector>

#include "engine/base/check.h"

namespace tandem::kernels {

void rope(std::span<float> x, size_t n_tokens, size_t n_heads, std::span<const int32_t> positions,
          const RopeConfig& config) {
  const size_t head_dim = config.head_dim;
  const size_t rot = config.rot_dims;
  TANDEM_CHECK(rot > 0 && rot % 2 == 0 && rot <= head_dim);
  TANDEM_CHECK(x.size() == n_tokens * n_heads * head_dim);
  TANDEM_CHECK(positions.size() == n_tokens);
  const size_t half = rot / 2;
  thread_local std::vector<float> inv_freq, cos_t, sin_t;
  inv_freq.resize(half);
  cos_t.resize(half);
  sin_t.resize(half);
  for (size_t i = 0; i < half; ++i) {
    const double exponent = -2.0 * static_cast<double>(i) / static_cast<double>(rot);
    inv_freq[i] = static_cast<float>(std::pow(static_cast<double>(config.freq_base), exponent));
  }
  const bool neox = config.layout == RopeLayout::kNeox;
  for (size_t t = 0; t < n_tokens; ++t) {
    const float pos = static_cast<float>(positions[t]);
    for (size_t i = 0; i < half; ++i) {
      const float theta = pos * inv_freq[i];
      cos_t[i] = static_cast<float>(std::cos(static_cast<double>(theta)));
      sin_t[i] = static_cast<float>(std::sin(static_cast<double>(theta)));
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
