// Scalar references of the element-wise and row kernels.
#include "kernels/cpu/vector_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"

namespace tandem::kernels {

float dot_f32(const float* a, const float* b, size_t n) {
  float acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (size_t k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  }
  for (; i < n; ++i) acc[i % 8] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void softmax(std::span<float> row) {
  TANDEM_CHECK(!row.empty());
  float max = -std::numeric_limits<float>::infinity();
  for (const float v : row) max = std::fmax(max, v);
  double sum = 0.0;
  for (float& v : row) {
    v = std::exp(v - max);
    sum += v;
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (float& v : row) v *= inv;
}

void sigmoid(std::span<const float> x, std::span<float> out) {
  TANDEM_CHECK(x.size() == out.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = 1.0f / (1.0f + std::exp(-x[i]));
}

void silu_mul(std::span<const float> gate, std::span<const float> up, std::span<float> out) {
  TANDEM_CHECK(gate.size() == up.size() && out.size() == gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void swiglu_oai_mul(std::span<const float> gate, std::span<const float> up, std::span<float> out,
                    float alpha, float limit) {
  TANDEM_CHECK(gate.size() == up.size() && out.size() == gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    out[i] = g / (1.0f + std::exp(alpha * -g)) * (u + 1.0f);
  }
}

void add(std::span<const float> a, std::span<const float> b, std::span<float> out) {
  TANDEM_CHECK(a.size() == b.size() && out.size() == a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
}

void scale(std::span<float> x, float s) {
  for (float& v : x) v *= s;
}

void add_scaled(std::span<float> acc, std::span<const float> x, float s) {
  TANDEM_CHECK(acc.size() == x.size());
  for (size_t i = 0; i < acc.size(); ++i) acc[i] += s * x[i];
}

}  // namespace tandem::kernels
