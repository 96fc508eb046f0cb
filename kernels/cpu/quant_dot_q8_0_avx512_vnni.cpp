// The AVX-512 VNNI Q8_0 x Q8_0 dot kernel of the weight-type table (built with the AVX-512 flags
// plus -mavx512vnni; called only when cpu_features() reports AVX-512 F/BW/VL and VNNI):
// bit-identical to dot_q8_0_scalar (quant_dot.h's eight-lane semantics).
//
// The eight lanes stay 256-bit registers (AVX-512 VL), so the float arithmetic is the
// reference's lane for lane. The integer part is one vpdpbusd per (row, token, block) instead of
// AVX2's sign / maddubs / madd: the activation quants are offset to unsigned bytes (x + 128, all
// of -128..127 fits), vpdpbusd sums (x + 128) * w over each 4-byte group into an int32 lane
// without saturation, and starting that sum from -128 * (sum of the group's w) — made once per
// weight block and shared by every token — leaves exactly the reference's p_l. With 32 vector
// registers the tiles are 4 rows x 4 tokens (AVX2: 2 x 4); one token runs 4-row tiles. The walk
// over rows, tokens and chunks is quant_dot_q8_0_tiles.h's; the prefetch of the next tile as
// AVX2's.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/quant_dot_q8_0_tiles.h"

namespace tandem::kernels::detail {
namespace {

struct Avx512VnniQ8_0 {
  static constexpr int kRows = 4;
  static constexpr int kDecodeRows = 4;

  // R rows (at w, row_bytes apart) x T tokens (activation rows at xq / xd, cols / blocks apart):
  // y[t * y_stride + r].
  template <int R, int T>
  static void tile(const uint8_t* w, size_t row_bytes, size_t blocks, const int8_t* xq,
                   const float* xd, float* y, size_t y_stride) {
    const size_t cols = blocks * kQ8_0Block;
    const __m256i offset = _mm256_set1_epi8(static_cast<char>(0x80));  // 128 as u8, -128 as s8
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    constexpr size_t kLines = (R * kQ8_0BlockBytes + 63) / 64 + 1;
    const uint8_t* next = w + R * row_bytes;
    for (size_t b = 0; b < blocks; ++b) {
#pragma GCC unroll 4
      for (size_t i = 0; i < kLines; ++i) {
        _mm_prefetch(reinterpret_cast<const char*>(next + (b * kLines + i) * 64), _MM_HINT_T0);
      }
      __m256i wv[R];
      __m256i start[R];  // -128 * (sum of each 4-byte group of w)
      __m256 dw[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const uint8_t* block = w + r * row_bytes + b * kQ8_0BlockBytes;
        wv[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
        start[r] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                    _mm256_dpbusd_epi32(_mm256_setzero_si256(), offset, wv[r]));
        dw[r] = _mm256_set1_ps(q8_0_fp16_at(block));
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i xu = _mm256_xor_si256(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + t * cols + b * 32)), offset);
        const __m256 dx = _mm256_broadcast_ss(xd + t * blocks + b);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          // Lane l: -128 * sum w + sum (x + 128) * w over elements 4l .. 4l+3 = the exact p_l.
          const __m256i p = _mm256_dpbusd_epi32(start[r], xu, wv[r]);
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw[r], dx), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) y[t * y_stride + r] = avx2_sum_lanes(acc[r][t]);
    }
  }
};

}  // namespace

void dot_q8_0_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride) {
  q8_0_dot<Avx512VnniQ8_0>(w, row_bytes, rows, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
