// The AVX2 Q8_0 x Q8_0 dot kernel of the weight-type table (built with -mavx2 -mfma -mf16c
// -ffp-contract=off; called only when cpu_features() reports them): bit-identical to
// dot_q8_0_scalar (quant_dot.h's eight-lane semantics).
//
// Tiles of R rows x T tokens keep one 8-lane float accumulator per (row, token): each weight block
// is loaded and made absolute once and used for all T tokens, each activation block for all R
// rows. One token (decode, memory-bound) runs 4-row tiles; several tokens run 2-row x 4-token
// tiles (the remainder 3, 2 or 1 tokens) over row chunks of kChunkBytes, every token group over a
// chunk before the next chunk, so a large matrix (the lm head of a batch) comes from DRAM once.
// Every tile prefetches the tile after it linearly: mapped checkpoint pages are 4 KiB and the
// hardware prefetchers restart at each page of each row (measured on the 2-core EPYC: decode of
// the Q8_0 bench model 10 -> 16 tokens/s with the prefetch, 16 streams 22.6 -> 30 with it on the
// multi-token tiles too; chunks of 256 KiB beat 64 KiB and 1 MiB on prefill and batches).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kBlock = 32;
constexpr size_t kBlockBytes = 34;      // fp16 d, 32 int8
constexpr size_t kChunkBytes = 262144;  // weight bytes per row chunk of several tokens (in L2)

float fp16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// (s0 + s2) + (s1 + s3) with s_i = lane_i + lane_(i+4): the scalar reference's tree.
float reduce_lanes(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// R rows (at w, row_bytes apart) x T tokens (activation rows at xq / xd, cols / blocks apart):
// y[t * y_stride + r].
template <int R, int T>
void tile(const uint8_t* w, size_t row_bytes, size_t blocks, const int8_t* xq, const float* xd,
          float* y, size_t y_stride) {
  const size_t cols = blocks * kBlock;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  // The tile after this one (R rows on when the rows are contiguous), prefetched linearly while
  // this one runs: kLines lines per block cover R blocks of 34 bytes. A prefetch never faults, so
  // running past the matrix is harmless.
  constexpr size_t kLines = (R * kBlockBytes + 63) / 64 + 1;
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
      const uint8_t* block = w + r * row_bytes + b * kBlockBytes;
      wv[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
      aw[r] = _mm256_sign_epi8(wv[r], wv[r]);
      dw[r] = _mm256_set1_ps(fp16_at(block));
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
    for (int t = 0; t < T; ++t) y[t * y_stride + r] = reduce_lanes(acc[r][t]);
  }
}

// All rows against T tokens starting at token t0.
template <int R, int T>
void rows_for_tokens(const uint8_t* w, size_t row_bytes, size_t rows, size_t blocks,
                     const int8_t* xq, const float* xd, float* y, size_t y_stride) {
  size_t r = 0;
  for (; r + R <= rows; r += R) {
    tile<R, T>(w + r * row_bytes, row_bytes, blocks, xq, xd, y + r, y_stride);
  }
  for (; r < rows; ++r) {
    tile<1, T>(w + r * row_bytes, row_bytes, blocks, xq, xd, y + r, y_stride);
  }
}

}  // namespace

void dot_q8_0_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride) {
  const size_t cols = x.cols;
  const size_t blocks = cols / kBlock;
  if (x.n_tokens == 1) {
    rows_for_tokens<4, 1>(w, row_bytes, rows, blocks, x.qs, x.d, y, y_stride);
    return;
  }
  // Rows in chunks of about kChunkBytes, every token group over a chunk before the next one: the
  // weights come from DRAM once, not once per group of four tokens.
  size_t chunk = (kChunkBytes / row_bytes) & ~size_t{1};
  if (chunk < 2) chunk = 2;
  for (size_t r0 = 0; r0 < rows; r0 += chunk) {
    const uint8_t* wc = w + r0 * row_bytes;
    const size_t n = rows - r0 < chunk ? rows - r0 : chunk;
    size_t t = 0;
    for (; t + 4 <= x.n_tokens; t += 4) {
      rows_for_tokens<2, 4>(wc, row_bytes, n, blocks, x.qs + t * cols, x.d + t * blocks,
                            y + t * y_stride + r0, y_stride);
    }
    const size_t left = x.n_tokens - t;
    const int8_t* xq = x.qs + t * cols;
    const float* xd = x.d + t * blocks;
    float* yt = y + t * y_stride + r0;
    if (left == 3) rows_for_tokens<2, 3>(wc, row_bytes, n, blocks, xq, xd, yt, y_stride);
    if (left == 2) rows_for_tokens<2, 2>(wc, row_bytes, n, blocks, xq, xd, yt, y_stride);
    if (left == 1) rows_for_tokens<4, 1>(wc, row_bytes, n, blocks, xq, xd, yt, y_stride);
  }
}

}  // namespace tandem::kernels::detail
