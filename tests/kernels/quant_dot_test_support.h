// Test helpers shared by the quantized dot-product kernel tests: the AVX2 and AVX-512 VNNI checks,
// fp16 stores, float bit patterns, random activation rows and strided outputs compared bit for bit.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::testing {

// Whether this CPU runs the AVX2 kernels.
inline bool have_avx2() {
  const CpuFeatures& f = cpu_features();
  return f.avx2 && f.fma && f.f16c;
}

// Whether this CPU runs the AVX-512 VNNI kernels (AVX-512 F/BW/VL and VNNI, plus the AVX2 set).
inline bool have_avx512_vnni() {
  const CpuFeatures& f = cpu_features();
  return have_avx2() && f.avx512f && f.avx512bw && f.avx512vl && f.avx512_vnni;
}

// The bit pattern of f (compares NaNs and signed zeros exactly).
inline uint32_t bits_of(float f) {
  uint32_t b = 0;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

// Stores fp16(v) little-endian at p.
inline void put_fp16(uint8_t* p, float v) {
  const uint16_t h = fp32_to_fp16_bits(v);
  p[0] = static_cast<uint8_t>(h & 0xff);
  p[1] = static_cast<uint8_t>(h >> 8);
}

// x (n_tokens rows of cols floats) quantized to `format`.
inline QuantizedActivations quantize(ActivationFormat format, const std::vector<float>& x,
                                     size_t n_tokens, size_t cols) {
  QuantizedActivations a;
  quantize_activations(format, x, n_tokens, cols, a);
  return a;
}

// n_tokens rows of standard-normal floats quantized to `format`.
inline QuantizedActivations random_activations(ActivationFormat format, size_t n_tokens,
                                               size_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n_tokens * cols);
  for (float& v : x) v = normal(rng);
  return quantize(format, x, n_tokens, cols);
}

// Runs fn into a y of y_stride columns per token (plus a tail), pre-filled with NaN.
inline std::vector<float> run_strided(detail::QuantDotFn fn, const uint8_t* w, size_t row_bytes,
                                      size_t rows, const ActivationRows& x, size_t y_stride) {
  std::vector<float> y(x.n_tokens * y_stride + 3, std::numeric_limits<float>::quiet_NaN());
  fn(w, row_bytes, rows, x, y.data(), y_stride);
  return y;
}

// Two run_strided outputs of `rows` rows and n_tokens tokens compared: the written elements whose
// bits differ, those finite in `want`, and the others (gaps and tail) not NaN in either.
struct StridedDiff {
  size_t mismatches = 0;
  size_t finite = 0;
  size_t touched = 0;
};

inline StridedDiff compare_strided(const std::vector<float>& got, const std::vector<float>& want,
                                   size_t n_tokens, size_t y_stride, size_t rows) {
  StridedDiff d;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool written = i < n_tokens * y_stride && i % y_stride < rows;
    if (written) {
      if (bits_of(got[i]) != bits_of(want[i])) ++d.mismatches;
      if (std::isfinite(want[i])) ++d.finite;
    } else if (!std::isnan(got[i]) || !std::isnan(want[i])) {
      ++d.touched;
    }
  }
  return d;
}

}  // namespace tandem::kernels::testing
