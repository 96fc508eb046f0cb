// Test helpers shared by the quantized dot-product kernel tests: the AVX2 and AVX-512 VNNI checks,
// fp16 stores, float bit patterns and random activation rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/cpu_features.h"

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

}  // namespace tandem::kernels::testing
