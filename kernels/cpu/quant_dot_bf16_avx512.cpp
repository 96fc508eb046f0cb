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

template <int R, int T>
void tile(const uint8_t* w, size_t row_bytes, size_t r0, const ActivationRows& x, size_t t0,
          float* y, size_t y_stride) {
  const size_t cols = x.cols;
  const uint16_t* wr[R];
  const uint16_t* xt[T];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    wr[r] = reinterpret_cast<const uint16_t*>(w + (r0 + r) * row_bytes);
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) xt[t] = x.bf16 + (t0 + t) * cols;
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
      const __m512i ws = load32(wr[r], i, cols);
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
      y[(t0 + t) * y_stride + r0 + r] = _mm512_reduce_add_ps(acc[t][r]);
    }
  }
}

// The bf16_walk tiles of one call.
struct Tiles {
  const uint8_t* w;
  size_t row_bytes;
  const ActivationRows* x;
  float* y;
  size_t y_stride;

  template <int R, int T>
  void run(size_t r, size_t t) const {
    tile<R, T>(w, row_bytes, r, *x, t, y, y_stride);
  }
};

}  // namespace

void dot_bf16_avx512(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride) {
  static const bool has_bf16 = cpu_features().avx512_bf16;
  if (has_bf16) {
    bf16_walk<4, 2>(row_bytes, rows, x.n_tokens, Tiles{w, row_bytes, &x, y, y_stride});
  } else {
    dot_bf16_avx2(w, row_bytes, rows, x, y, y_stride);
  }
}

}  // namespace tandem::kernels::detail
