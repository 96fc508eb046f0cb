// AVX-512 VNNI (+F/BW/VL, 256-bit lanes) dot product of Q6_K weights in the interleaved x8 layout
// (quant_dot.h) with Q8_K activations, bit-identical to dot_q6_k_scalar on the plain rows. Built
// with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -ffp-contract=off; only the exported function
// has external linkage.
//
// Technique (as Q4_K x8's, quant_dot_q4_k_x8_tiles.h): one 32-bit lane per weight row. Per quad m
// of a 64-element chunk c, one 32-byte load of low nibbles and (every other m) one of top bits give
// each row's four 6-bit quants q (0..63) of groups 4c + m / 4 and 4c + 2 + m / 4; with the four
// matching activation quants broadcast, one vpdpbusd per group adds sum(q * x) for all eight rows.
// Each group's sum starts at -32 * its activation sum (the Q8_K bsums), so after its four quads a
// lane holds the row's exact sum((q - 32) * x); vpmulld by the row's int8 scale adds it to isum.
// Then, lane-wise and in block order, the reference's (d * dx) * float(isum) and sum + term.
// Every integer is exact: |group sum| <= 16 * 63 * 128 + 32 * 16 * 128, times |scale| <= 128, and
// sixteen of them stay below 2^31.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/quant_dot_q8k_x8_call.h"
#include "kernels/cpu/quant_dot_x8_walk.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kSuper = 256;
constexpr size_t kBlockBytes = 1680;  // one super-block of a group (quant_dot.h)
constexpr size_t kScaleOffset = 16;
constexpr size_t kChunkOffset = 144;  // chunk c (64 elements) at 144 + 384c: 256 low, 128 top bytes
constexpr size_t kChunkBytes = 384;
constexpr size_t kTopOffset = 256;    // within a chunk
constexpr size_t kSumsPerBlock = 16;  // Q8_K bsums per super-block

template <int T>
using Tokens = Q8KTokens<T>;

// The 6-bit quants of one quad for the low-nibble and high-nibble groups: (v's nibble) | (the two
// top bits at `shift` and shift + 2 of h) << 4.
[[gnu::always_inline]] inline void quants(__m256i v, __m256i h, int shift, __m256i& lo,
                                          __m256i& hi) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i top2 = _mm256_set1_epi8(0x30);
  const __m256i hs = _mm256_srli_epi16(h, shift);
  lo = _mm256_or_si256(_mm256_and_si256(v, low4), _mm256_and_si256(_mm256_slli_epi16(hs, 4), top2));
  hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4),
                       _mm256_and_si256(_mm256_slli_epi16(hs, 2), top2));
}

// One group (at g0, `blocks` super-blocks) against the tile's T tokens. No software prefetch (see
// quant_dot_x8_walk.h).
template <int T>
void run_tile(const uint8_t* g0, size_t blocks, const Tokens<T>& x, const X8Outputs<T>& y) {
  __m256 sum[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) sum[t] = _mm256_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = g0 + b * kBlockBytes;
    __m256i isum[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      // acc[t][k]: group 4c + k (k = 0, 1: low nibbles, quads 0-3 and 4-7; k = 2, 3: high).
      __m256i acc[T][4];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int16_t* bs = x.bsums[t] + b * kSumsPerBlock + 4 * c;
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) acc[t][k] = _mm256_set1_epi32(-32 * bs[k]);
      }
      __m256i h = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m) {
        const uint8_t* chunk = blk + kChunkOffset + kChunkBytes * c;
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 32 * m));
        if (m % 2 == 0) {
          h = _mm256_loadu_si256(
              reinterpret_cast<const __m256i*>(chunk + kTopOffset + 32 * (m / 2)));
        }
        __m256i lo, hi;
        quants(v, h, 4 * (m % 2), lo, hi);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const int8_t* xb = x.xq[t] + b * kSuper + 64 * c + 4 * m;
          acc[t][m / 4] = _mm256_dpbusd_epi32(acc[t][m / 4], lo, broadcast4(xb));
          acc[t][2 + m / 4] = _mm256_dpbusd_epi32(acc[t][2 + m / 4], hi, broadcast4(xb + 32));
        }
      }
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i scale = _mm256_cvtepi8_epi32(_mm_loadl_epi64(
            reinterpret_cast<const __m128i*>(blk + kScaleOffset + 8 * (4 * c + k))));
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(acc[t][k], scale));
        }
      }
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m256 term =
          _mm256_mul_ps(_mm256_mul_ps(dw, _mm256_set1_ps(x.xd[t][b])), _mm256_cvtepi32_ps(isum[t]));
      sum[t] = _mm256_add_ps(sum[t], term);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) store_lanes(sum[t], y.out[t], y.lane_begin, y.lane_end);
}

// run_tile as quant_dot_q8k_x8_call.h's Tile.
struct Tile {
  template <int T>
  static void run(const uint8_t* g0, size_t blocks, const Tokens<T>& x, const X8Outputs<T>& y) {
    run_tile<T>(g0, blocks, x, y);
  }
};

}  // namespace

void dot_q6_k_x8_avx512_vnni(const uint8_t* groups, size_t row_begin, size_t row_end,
                             const ActivationRows& x, float* y, size_t y_stride) {
  q8k_x8_dot<Tile>(groups, kBlockBytes, row_begin, row_end, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
