// F8_E4M3_B128 weights x BF16 activations on AVX2 + FMA + F16C (quant_dot.h). Eight codes at a
// time become float32 through the fp16 route: sign-extended to 16 bits and shifted left by 7, an
// E4M3 code is the fp16 pattern of its value times 2^-8 once the sign's copy in bit 14 is cleared
// (subnormal codes land on fp16 subnormals, which vcvtph2ps converts exactly and without a
// microcode assist); the block scale times 2^8 restores the value. The activations widen from
// bfloat16 by a shift; one FMA chain per (row, token). From kConvertFromTokens tokens on, a
// register tile would convert each code for too few tokens: dot_f8_b128_converted on the AVX2
// table.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/avx2_sum_lanes.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/quant_dot_bf16_walk.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kBlock = 128;
constexpr size_t kBlockBytes = 4 + kBlock;
constexpr size_t kConvertFromTokens = 8;

// The values of the eight codes at p, times 2^-8.
__m256 codes8(const uint8_t* p) {
  const __m128i c = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_cvtph_ps(
      _mm_and_si128(_mm_slli_epi16(c, 7), _mm_set1_epi16(static_cast<short>(0xBFFF))));
}

// The eight bfloat16 values at p as float32.
__m256 bf16x8(const uint16_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

struct Avx2F8 {
  template <int R, int T>
  static void tile(const uint8_t* const* w, const uint16_t* const* x, size_t cols, float* y,
                   size_t y_stride) {
    __m256 acc[T][R];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[t][r] = _mm256_setzero_ps();
    }
    for (size_t b = 0; b < cols / kBlock; ++b) {
      float scale[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        std::memcpy(&scale[r], w[r] + b * kBlockBytes, 4);
        scale[r] *= 0x1p8f;
      }
      for (size_t j = 0; j < kBlock; j += 8) {
        __m256 xs[T];
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) xs[t] = bf16x8(x[t] + b * kBlock + j);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m256 wv =
              _mm256_mul_ps(codes8(w[r] + b * kBlockBytes + 4 + j), _mm256_set1_ps(scale[r]));
#pragma GCC unroll 16
          for (int t = 0; t < T; ++t) acc[t][r] = _mm256_fmadd_ps(wv, xs[t], acc[t][r]);
        }
      }
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) y[t * y_stride + r] = avx2_sum_lanes(acc[t][r]);
    }
  }
};

}  // namespace

void dot_f8_b128_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                      float* y, size_t y_stride) {
  if (x.n_tokens >= kConvertFromTokens) {
    dot_f8_b128_converted(matmul_kernels_avx2(), w, row_bytes, rows, x, y, y_stride);
  } else {
    bf16_dot<Avx2F8, 2, 4>(w, row_bytes, rows, x, y, y_stride);
  }
}

}  // namespace tandem::kernels::detail
