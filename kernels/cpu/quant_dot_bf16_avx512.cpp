// BF16 weights x BF16 activations on AVX-512 (quant_dot.h): vdpbf16ps (32 products per
// instruction, pairs of neighbouring elements summed into one float32 lane) where the CPU has
// AVX512-BF16; otherwise the AVX2 kernel.
#include <immintrin.h>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/quant_dot_bf16_walk.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kStep = 32;  // bf16 values per 512-bit load

// The values [i, i + 32) at p, or the first cols - i of them zero-padded.
__m512i load32(const uint16_t* p, size_t i, size_t cols) {
  if (i + kStep <= cols) return _mm512_loadu_si512(p + i);
  return _mm512_maskz_loadu_epi16(static_cast<__mmask32>((uint64_t{1} << (cols - i)) - 1), p + i);
}

struct Avx512Bf16 {
  template <int R, int T>
  static void tile(const uint8_t* const* wr, const uint16_t* const* xt, size_t cols, float* y,
                   size_t y_stride) {
    __m512 acc[T][R];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
    }
    for (size_t i = 0; i < cols; i += kStep) {
      __m512i xs[T];
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) xs[t] = load32(xt[t], i, cols);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512i ws = load32(reinterpret_cast<const uint16_t*>(wr[r]), i, cols);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          acc[t][r] = _mm512_dpbf16_ps(acc[t][r], reinterpret_cast<const __m512bh&>(xs[t]),
                                       reinterpret_cast<const __m512bh&>(ws));
        }
      }
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        y[t * y_stride + r] = _mm512_reduce_add_ps(acc[t][r]);
      }
    }
  }
};

}  // namespace

void dot_bf16_avx512(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride) {
  static const bool has_bf16 = cpu_features().avx512_bf16;
  if (has_bf16) {
    bf16_dot<Avx512Bf16, 4, 2>(w, row_bytes, rows, x, y, y_stride);
  } else {
    dot_bf16_avx2(w, row_bytes, rows, x, y, y_stride);
  }
}

}  // namespace tandem::kernels::detail
