// Many-token calls of the Q4_K / Q5_K x8 dot products on AVX-512 VNNI: two groups (16 rows) in the
// 32-bit lanes of one 512-bit register, four tokens per tile. Included (after a Q45KX8Isa, as
// quant_dot_q45_k_x8_tiles.h wants) by a file built with -mavx512f -mavx512bw -mavx512vl
// -mavx512vnni; internal linkage.
//
// The arithmetic of quant_dot_q45_k_x8_tiles.h lane for lane (one vpdpbusd per four quants of a
// sub-block, vpmulld by the scale, the same float combine), so the results are the same bits;
// only the register width changes. Each activation broadcast and each unpacking instruction then
// serves sixteen rows instead of eight: on a Zen 4, which runs a 512-bit vpdpbusd at half the rate
// of a 256-bit one, the gain is the instructions saved around the dot products. The walk
// (quant_dot_x8_pairs_walk.h) leaves the rest to the 256-bit tiles.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/quant_dot_q45_k_x8_tiles.h"
#include "kernels/cpu/quant_dot_q4_k_x8_scales.h"
#include "kernels/cpu/quant_dot_x8_pairs_walk.h"

namespace tandem::kernels::detail {
namespace {

// Both groups' super-block scales and mins: sc[j] = row i's scale of sub-block j in lane i
// (rows 8-15: the second group); mins[c] = (min_2c, min_2c+1) of row i as int16 halves of lane i.
struct PairScales {
  __m512i sc[8];
  __m512i mins[4];
};

[[gnu::always_inline]] inline void unpack_pair_scales(const uint8_t* blk0, const uint8_t* blk1,
                                                      PairScales& s) {
  alignas(32) uint8_t sc[2][64];
  alignas(32) uint8_t mn[2][64];
  q4_k_x8_scale_bytes(blk0, sc[0], mn[0]);
  q4_k_x8_scale_bytes(blk1, sc[1], mn[1]);
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const __m128i both =
        _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc[0] + 8 * j)),
                           _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc[1] + 8 * j)));
    s.sc[j] = _mm512_cvtepu8_epi32(both);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    __m128i half[2];
    for (int g = 0; g < 2; ++g) {
      half[g] =
          _mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn[g] + 16 * c)),
                            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn[g] + 16 * c + 8)));
    }
    s.mins[c] =
        _mm512_cvtepu8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(half[0]), half[1], 1));
  }
}

// Groups g0 and g1 = g0 + one group's bytes, `blocks` super-blocks, against four tokens; token t's
// sixteen results go to out[t][0 .. 16).
template <class Format>
void run_pair_tile(const uint8_t* g0, const uint8_t* g1, size_t blocks,
                   const Q8KTokens<kPairTokens>& x, float* const* out) {
  constexpr int T = kPairTokens;
  constexpr bool kHighBits = Format::kQuantMax > 15;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  __m512 sum[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) sum[t] = _mm512_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* blk0 = g0 + b * Format::kBlockBytes;
    const uint8_t* blk1 = g1 + b * Format::kBlockBytes;
    PairScales s;
    unpack_pair_scales(blk0, blk1, s);
    __m512i isum[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const size_t chunk = kQuantOffset + Format::kChunkBytes * c;
      __m512i lo[T];
      __m512i hi[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        lo[t] = _mm512_setzero_si512();
        hi[t] = _mm512_setzero_si512();
      }
      __m512i hb = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m) {
        const __m512i v = load_pair(blk0 + chunk + 32 * m, blk1 + chunk + 32 * m);
        __m512i wl = _mm512_and_si512(v, low4);
        __m512i wh = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        if constexpr (kHighBits) {
          if (m % 4 == 0) {
            const size_t at = chunk + kHighBitsOffset + 32 * (m / 4);
            hb = load_pair(blk0 + at, blk1 + at);
          }
          wl = _mm512_or_si512(wl, _mm512_and_si512(_mm512_slli_epi16(hb, 4 - m % 4), bit4));
          wh = _mm512_or_si512(wh, _mm512_and_si512(_mm512_srli_epi16(hb, m % 4), bit4));
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const int8_t* xb = x.xq[t] + b * kSuper + 64 * c + 4 * m;
          lo[t] = _mm512_dpbusd_epi32(lo[t], wl, broadcast4_512(xb));
          hi[t] = _mm512_dpbusd_epi32(hi[t], wh, broadcast4_512(xb + 32));
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(lo[t], s.sc[2 * c]));
        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(hi[t], s.sc[2 * c + 1]));
      }
    }
    const __m512 dw = halves_pair(blk0, blk1);
    const __m512 dmin = halves_pair(blk0 + 16, blk1 + 16);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      // The token's sub-block sums bsums[2j] + bsums[2j + 1] as int16 pairs (j = 2c, 2c + 1).
      const int16_t* bs = x.bsums[t] + b * kSumsPerBlock;
      __m512i imin = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const int16_t even = static_cast<int16_t>(bs[4 * c] + bs[4 * c + 1]);
        const int16_t odd = static_cast<int16_t>(bs[4 * c + 2] + bs[4 * c + 3]);
        const uint32_t pair =
            static_cast<uint16_t>(even) | (static_cast<uint32_t>(static_cast<uint16_t>(odd)) << 16);
        imin = _mm512_add_epi32(
            imin, _mm512_madd_epi16(s.mins[c], _mm512_set1_epi32(static_cast<int32_t>(pair))));
      }
      const __m512 dx = _mm512_set1_ps(x.xd[t][b]);
      const __m512 term =
          _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(dw, dx), _mm512_cvtepi32_ps(isum[t])),
                        _mm512_mul_ps(_mm512_mul_ps(dmin, dx), _mm512_cvtepi32_ps(imin)));
      sum[t] = _mm512_add_ps(sum[t], term);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out[t], sum[t]);
}

// run_pair_tile as quant_dot_x8_pairs_walk.h's PairTile.
template <class Format>
struct Q45KPairTile {
  static void run(const uint8_t* g0, const uint8_t* g1, size_t blocks,
                  const Q8KTokens<kPairTokens>& x, float* const* out) {
    run_pair_tile<Format>(g0, g1, blocks, x, out);
  }
};

}  // namespace
}  // namespace tandem::kernels::detail
