// Scalar references of the exp row kernels (exp_rows.h): one lane at a time, exp_lanes.h's
// operations with std::fma for each fused multiply-add (built with -ffp-contract=off, so nothing
// else is fused).
#include "kernels/cpu/exp_rows.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace tandem::kernels::detail {
namespace {

struct Lanes {
  using F = float;
  using I = int32_t;
  static F set1(float f) { return f; }
  static F fma(F a, F b, F c) { return std::fma(a, b, c); }
  static F add(F a, F b) { return a + b; }
  static F sub(F a, F b) { return a - b; }
  static F mul(F a, F b) { return a * b; }
  static F div(F a, F b) { return a / b; }
  static F max(F a, F b) { return a > b ? a : b; }
  static F min(F a, F b) { return a < b ? a : b; }
  static I bits(F f) { return std::bit_cast<int32_t>(f); }
  static F from_bits(I i) { return std::bit_cast<float>(i); }
  static I set1_i(int32_t i) { return i; }
  // Two's-complement wrap-around as the vector instructions (only NaN inputs get here with
  // out-of-range values, and their result is NaN whatever the scale).
  static I add_i(I a, I b) {
    return static_cast<I>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  }
  static I sub_i(I a, I b) {
    return static_cast<I>(static_cast<uint32_t>(a) - static_cast<uint32_t>(b));
  }
  static I half_i(I a) { return a >> 1; }
  static I exponent_i(I a) { return static_cast<I>(static_cast<uint32_t>(a) << 23); }
};

}  // namespace
}  // namespace tandem::kernels::detail

#include "kernels/cpu/exp_lanes.h"

namespace tandem::kernels::detail {

void exp_row_scalar(const float* x, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = exp_lanes<Lanes>(x[i]);
}

void softmax_scalar(float* row, size_t n, const float* sink) {
  float max = sink != nullptr ? *sink : -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) max = Lanes::max(row[i], max);
  double lane[16] = {};
  for (size_t i = 0; i < n; ++i) {
    row[i] = exp_lanes<Lanes>(row[i] - max);
    lane[i % 16] += row[i];
  }
  for (size_t w = 8; w > 0; w /= 2) {
    for (size_t l = 0; l < w; ++l) lane[l] += lane[l + w];
  }
  double sum = lane[0];
  if (sink != nullptr) sum += exp_lanes<Lanes>(*sink - max);
  const float inv = static_cast<float>(1.0 / sum);
  for (size_t i = 0; i < n; ++i) row[i] *= inv;
}

void sigmoid_scalar(const float* x, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = sigmoid_lanes<Lanes>(x[i]);
}

void silu_mul_scalar(const float* gate, const float* up, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = silu_mul_lanes<Lanes>(gate[i], up[i]);
}

void swiglu_oai_scalar(const float* gate, const float* up, size_t n, float alpha, float limit,
                       float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = swiglu_oai_lanes<Lanes>(gate[i], up[i], alpha, limit);
}

}  // namespace tandem::kernels::detail
