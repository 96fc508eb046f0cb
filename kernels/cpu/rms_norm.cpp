// RMSNorm scalar reference.
#include "kernels/cpu/rms_norm.h"

#include <cmath>

#include "base/check.h"

namespace tandem::kernels {

void rms_norm(std::span<const float> x, std::span<const float> weight, float eps, size_t n_rows,
              size_t dim, std::span<float> out) {
  TANDEM_CHECK(dim > 0);
  TANDEM_CHECK(x.size() == n_rows * dim && out.size() == x.size());
  TANDEM_CHECK(weight.size() == dim);
  for (size_t r = 0; r < n_rows; ++r) {
    const float* xr = x.data() + r * dim;
    float* yr = out.data() + r * dim;
    double sum = 0.0;
    for (size_t i = 0; i < dim; ++i) sum += static_cast<double>(xr[i]) * xr[i];
    const float mean = static_cast<float>(sum / static_cast<double>(dim));
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (size_t i = 0; i < dim; ++i) yr[i] = (xr[i] * scale) * weight[i];
  }
}

void rms_norm_heads(std::span<const float> x, std::span<const float> weight, float eps,
                    size_t n_tokens, size_t n_heads, size_t head_dim, std::span<float> out) {
  rms_norm(x, weight, eps, n_tokens * n_heads, head_dim, out);
}

}  // namespace tandem::kernels
