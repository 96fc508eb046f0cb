// The AVX2 Q8_0 x Q8_0 dot kernel of the weight-type table (built with -mavx2 -mfma -mf16c
// -ffp-contract=off; called only when cpu_features() reports them): bit-identical to
// dot_q8_0_scalar (quant_dot.h's eight-lane semantics).
//
// Tiles of R rows x T tokens keep one 8-lane float accumulator per (row, token): each weight block
// is loaded and made absolute once and used for all T tokens, each activation block for all R
// rows. One token (decode, memory-bound) runs 4-row tiles, several tokens 2-row x 4-token tiles
// (16 vector registers); the walk over rows, tokens and chunks is quant_dot_q8_0_tiles.h's.
// Every tile prefetches the tile after it linearly: mapped checkpoint pages are 4 KiB and the
// hardware prefetchers restart at each page of each row (measured on the 2-core EPYC: decode of
// the Q8_0 bench model 10 -> 16 tokens/s with the prefetch, 16 streams 22.6 -> 30 with it on the
// multi-token tiles too; chunks of 256 KiB beat 64 KiB and 1 MiB on prefill and batches).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/quant_dot_q8_0_tiles.h"

namespace tandem::kernels::detail {
namespace {

struct Avx2Q8_0 {
  static constexpr int kRows = 2;
  static constexpr int kDecodeRows = 4;

  // R rows (at w, row_bytes apart) x T tokens (activation rows at xq / xd, cols / blocks apart):
  // y[t * y_stride + r].
  template <int R, int T>
  static void tile(const uint8_t* w, size_t row_bytes, size_t blocks, const int8_t* xq,
                   const float* xd, float* y, size_t y_stride) {
    const size_t cols = blocks * kQ8_0Block;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    // The tile after this one (R rows on when the rows are contiguous), prefetched linearly while
    // this one runs: kLines lines per block cover R blocks of 34 bytes. A prefetch never faults, so
    // running past the matrix is harmless.
    constexpr size_t kLines = (R * kQ8_0BlockBytes + 63) / 64 + 1;
    const uint8_t* next = w + R * row_bytes;
    for (size_t b = 0; b < blocks; ++b) {
#pragma GCC unroll 4
      for (size_t i = 0; i < kLines; ++i) {
        _mm_prefetch(reinterpret_cast<const char*>(next + (b * kLines + i) * 64), _MM_HINT_T0);
      }
      __m256i wv[R];
      __m256i aw[R];
      __m256 dw[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const uint8_t* block = w + r * row_bytes + b * kQ8_0BlockBytes;
        wv[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
        aw[r] = _mm256_sign_epi8(wv[r], wv[r]);
        dw[r] = _mm256_set1_ps(q8_0_fp16_at(block));
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i x =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + t * cols + b * 32));
        const __m256 dx = _mm256_broadcast_ss(xd + t * blocks + b);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          // |w| as unsigned bytes times x with w's sign: pair sums at most 2 * 128 * 127 < 2^15
          // (activations never hold -128), so maddubs does not saturate; lane l of the madd is the
          // exact sum over elements 4l .. 4l+3.
          const __m256i p =
              _mm256_madd_epi16(_mm256_maddubs_epi16(aw[r], _mm256_sign_epi8(x, wv[r])), ones);
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

void dot_q8_0_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride) {
  q8_0_dot<Avx2Q8_0>(w, row_bytes, rows, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
