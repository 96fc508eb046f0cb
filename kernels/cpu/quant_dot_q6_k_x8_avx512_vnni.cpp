// AVX-512 VNNI (+F/BW/VL, 256-bit lanes) dot product of Q6_K weights in the interleaved x8 layout
// (quant_dot.h) with Q8_K activations, bit-identical to dot_q6_k_scalar on the plain rows (the
// tiles of quant_dot_q6_k_x8_tiles.h; from 4 tokens on, two groups per 512-bit register,
// quant_dot_q6_k_x8_pairs_avx512.h). Built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni
// -ffp-contract=off; only the exported function has external linkage.
//
// Technique (as Q4_K x8's, quant_dot_q45_k_x8_tiles.h): one 32-bit lane per weight row. Per quad m
// of a 64-element chunk c, one 32-byte load of low nibbles and (every other m) one of top bits give
// each row's four 6-bit quants q (0..63) of groups 4c + m / 4 and 4c + 2 + m / 4; with the four
// matching activation quants broadcast, one vpdpbusd per group adds sum(q * x) for all eight rows.
// Each group's sum starts at -32 * its activation sum (the Q8_K bsums), so after its four quads a
// lane holds the row's exact sum((q - 32) * x); vpmulld by the row's int8 scale adds it to isum.
// Every integer is exact: |group sum| <= 16 * 63 * 128 + 32 * 16 * 128, times |scale| <= 128, and
// sixteen of them stay below 2^31.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {
namespace {

struct Q6KX8Isa {
  // No software prefetch: on a Zen 4 the hardware prefetchers alone stream these tiles fastest
  // (quant_dot_x8_walk.h).
  static constexpr size_t kPrefetchAhead = 0;
  template <int T>
  static void block_sums(const uint8_t* blk, const int8_t* const* xq, const int16_t* const* bsums,
                         __m256i* isum);
};

}  // namespace
}  // namespace tandem::kernels::detail

#include "kernels/cpu/quant_dot_q6_k_x8_tiles.h"
// After the tiles: the pair tile uses their constants.
#include "kernels/cpu/quant_dot_q6_k_x8_lanes.h"
#include "kernels/cpu/quant_dot_q6_k_x8_pairs_avx512.h"
#include "kernels/cpu/quant_dot_x8_lanes_avx512.h"

namespace tandem::kernels::detail {
namespace {

template <int T>
void Q6KX8Isa::block_sums(const uint8_t* blk, const int8_t* const* xq, const int16_t* const* bsums,
                          __m256i* isum) {
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    // acc[t][k]: group 4c + k (k = 0, 1: low nibbles, quads 0-3 and 4-7; k = 2, 3: high).
    __m256i acc[T][4];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) acc[t][k] = _mm256_set1_epi32(-32 * bsums[t][4 * c + k]);
    }
    __m256i h = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) {
      const uint8_t* chunk = blk + kChunkOffset + kChunkBytes * c;
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 32 * m));
      if (m % 2 == 0) {
        h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + kTopOffset + 32 * (m / 2)));
      }
      __m256i lo, hi;
      q6_k_x8_quants(v, h, 4 * (m % 2), lo, hi);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int8_t* xb = xq[t] + 64 * c + 4 * m;
        acc[t][m / 4] = _mm256_dpbusd_epi32(acc[t][m / 4], lo, broadcast4(xb));
        acc[t][2 + m / 4] = _mm256_dpbusd_epi32(acc[t][2 + m / 4], hi, broadcast4(xb + 32));
      }
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256i scale = _mm256_cvtepi8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + kScaleOffset + 8 * (4 * c + k))));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(acc[t][k], scale));
      }
    }
  }
}

}  // namespace

void dot_q6_k_x8_avx512_vnni(const uint8_t* groups, size_t row_begin, size_t row_end,
                             const ActivationRows& x, float* y, size_t y_stride) {
  if (x.n_tokens >= LanesAvx512::kMinTokens) {
    x8_lanes_dot<LanesAvx512, Q6KLanes>(groups, row_begin, row_end, x, y, y_stride, dot_q6_k_x8,
                                        dot_q6_k_x8_avx512_vnni);
    return;
  }
  x8_pairs_dot<Q6KPairTile>(groups, kBlockBytes, row_begin, row_end, x, y, y_stride, dot_q6_k_x8);
}

}  // namespace tandem::kernels::detail
