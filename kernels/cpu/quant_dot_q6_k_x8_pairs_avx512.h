// Many-token calls of the Q6_K x8 dot product on AVX-512 VNNI: two groups (16 rows) in the 32-bit
// lanes of one 512-bit register, four tokens per tile, the arithmetic of
// quant_dot_q6_k_x8_avx512_vnni.cpp lane for lane (the same bits). Included after
// quant_dot_q6_k_x8_tiles.h by that file; internal linkage. The walk (quant_dot_x8_pairs_walk.h)
// leaves calls of fewer tokens, and the rows and tokens outside whole pairs and tiles, to the
// 256-bit tiles.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/quant_dot_x8_pairs_walk.h"

namespace tandem::kernels::detail {
namespace {

// q6_k_x8_quants on sixteen rows.
[[gnu::always_inline]] inline void q6_k_pair_quants(__m512i v, __m512i h, int shift, __m512i& lo,
                                                    __m512i& hi) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i top2 = _mm512_set1_epi8(0x30);
  const __m512i hs = _mm512_srli_epi16(h, shift);
  lo = _mm512_or_si512(_mm512_and_si512(v, low4), _mm512_and_si512(_mm512_slli_epi16(hs, 4), top2));
  hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), low4),
                       _mm512_and_si512(_mm512_slli_epi16(hs, 2), top2));
}

// Groups g0 and g1, `blocks` super-blocks, against four tokens; token t's sixteen results go to
// out[t][0 .. 16).
void run_q6_k_pair_tile(const uint8_t* g0, const uint8_t* g1, size_t blocks,
                        const Q8KTokens<kPairTokens>& x, float* const* out) {
  constexpr int T = kPairTokens;
  __m512 sum[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) sum[t] = _mm512_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* blk0 = g0 + b * kBlockBytes;
    const uint8_t* blk1 = g1 + b * kBlockBytes;
    __m512i isum[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      // acc[t][k]: group 4c + k (k = 0, 1: low nibbles, quads 0-3 and 4-7; k = 2, 3: high).
      __m512i acc[T][4];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int16_t* bs = x.bsums[t] + b * kSumsPerBlock + 4 * c;
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) acc[t][k] = _mm512_set1_epi32(-32 * bs[k]);
      }
      const size_t chunk = kChunkOffset + kChunkBytes * c;
      __m512i h = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m) {
        const __m512i v = load_pair(blk0 + chunk + 32 * m, blk1 + chunk + 32 * m);
        if (m % 2 == 0) {
          const size_t at = chunk + kTopOffset + 32 * (m / 2);
          h = load_pair(blk0 + at, blk1 + at);
        }
        __m512i lo, hi;
        q6_k_pair_quants(v, h, 4 * (m % 2), lo, hi);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const int8_t* xb = x.xq[t] + b * kSuper + 64 * c + 4 * m;
          acc[t][m / 4] = _mm512_dpbusd_epi32(acc[t][m / 4], lo, broadcast4_512(xb));
          acc[t][2 + m / 4] = _mm512_dpbusd_epi32(acc[t][2 + m / 4], hi, broadcast4_512(xb + 32));
        }
      }
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const size_t at = kScaleOffset + 8 * (4 * c + k);
        const __m512i scale = _mm512_cvtepi8_epi32(
            _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk0 + at)),
                               _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk1 + at))));
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(acc[t][k], scale));
        }
      }
    }
    const __m512 dw = halves_pair(blk0, blk1);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m512 term =
          _mm512_mul_ps(_mm512_mul_ps(dw, _mm512_set1_ps(x.xd[t][b])), _mm512_cvtepi32_ps(isum[t]));
      sum[t] = _mm512_add_ps(sum[t], term);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out[t], sum[t]);
}

// run_q6_k_pair_tile as quant_dot_x8_pairs_walk.h's PairTile.
struct Q6KPairTile {
  static void run(const uint8_t* g0, const uint8_t* g1, size_t blocks,
                  const Q8KTokens<kPairTokens>& x, float* const* out) {
    run_q6_k_pair_tile(g0, g1, blocks, x, out);
  }
};

}  // namespace
}  // namespace tandem::kernels::detail
