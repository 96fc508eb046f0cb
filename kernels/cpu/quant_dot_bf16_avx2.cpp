// BF16 weights x BF16 activations on AVX2 + FMA (quant_dot.h): each 32-bit lane of a 16-value load
// holds elements 2j (low half) and 2j + 1 (high half); shifting the low half up and masking the
// high half gives both as float32 exactly, for weights and activations alike, and two FMA chains
// per (row, token) take them.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/avx2_sum_lanes.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/quant_dot_bf16_walk.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kStep = 16;  // bf16 values per 256-bit load

struct Pair {
  __m256 even, odd;
};

Pair widen(__m256i v) {
  return {
      _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)),
      _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))))};
}

__m256i load16(const uint16_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// The n < 16 values at p, zero-padded.
__m256i load_tail(const uint16_t* p, size_t n) {
  uint16_t buf[kStep] = {};
  std::memcpy(buf, p, 2 * n);
  return load16(buf);
}

struct Avx2Bf16 {
  template <int R, int T>
  static void tile(const uint8_t* const* w, const uint16_t* const* x, size_t cols, float* y,
                   size_t y_stride) {
    __m256 a0[T][R], a1[T][R];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) a0[t][r] = a1[t][r] = _mm256_setzero_ps();
    }
    auto step = [&](auto load) {
      Pair xs[T];
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) xs[t] = widen(load(x[t]));
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const Pair ws = widen(load(reinterpret_cast<const uint16_t*>(w[r])));
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          a0[t][r] = _mm256_fmadd_ps(ws.even, xs[t].even, a0[t][r]);
          a1[t][r] = _mm256_fmadd_ps(ws.odd, xs[t].odd, a1[t][r]);
        }
      }
    };
    size_t i = 0;
    for (; i + kStep <= cols; i += kStep) {
      step([i](const uint16_t* p) { return load16(p + i); });
    }
    if (i < cols) {
      step([i, cols](const uint16_t* p) { return load_tail(p + i, cols - i); });
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        y[t * y_stride + r] = avx2_sum_lanes(_mm256_add_ps(a0[t][r], a1[t][r]));
      }
    }
  }
};

}  // namespace

void dot_bf16_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride) {
  bf16_dot<Avx2Bf16, 4, 2>(w, row_bytes, rows, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
