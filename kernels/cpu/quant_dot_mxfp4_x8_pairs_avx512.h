// Many-token calls of the MXFP4 x8 dot product on AVX-512 VNNI: two groups (16 rows) in the 32-bit
// lanes of one 512-bit register, four tokens per tile, the arithmetic of
// quant_dot_mxfp4_x8_tiles.h with quant_dot_mxfp4_x8_avx512_vnni.cpp's vpdpbusd block sums, lane
// for lane (the same bits). Included after quant_dot_mxfp4_x8_tiles.h by that file; internal
// linkage. The walk (quant_dot_x8_pairs_walk.h) leaves calls of fewer tokens, and the rows and
// tokens outside whole pairs and tiles, to the 256-bit tiles.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot_x8_pairs_walk.h"

namespace tandem::kernels::detail {
namespace {

// Groups g0 and g1, `blocks` blocks, against four tokens; token t's sixteen results go to
// out[t][0 .. 16).
void run_mxfp4_pair_tile(const uint8_t* g0, const uint8_t* g1, size_t blocks,
                         const TokenTile<kPairTokens>& x, float* const* out) {
  constexpr int T = kPairTokens;
  // The doubled E2M1 values plus 12, indexed by the 4-bit code, in every 128-bit quarter.
  const __m512i biased_values = _mm512_broadcast_i32x4(
      _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
  const __m512i mask = _mm512_set1_epi8(0x0f);
  __m512 acc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* blk0 = g0 + b * kBlockBytes;
    const uint8_t* blk1 = g1 + b * kBlockBytes;
    __m512i lo[4], hi[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const size_t at = kScaleBytes + 32 * static_cast<size_t>(k);
      const __m512i v = load_pair(blk0 + at, blk1 + at);
      lo[k] = _mm512_shuffle_epi8(biased_values, _mm512_and_si512(v, mask));
      hi[k] = _mm512_shuffle_epi8(biased_values, _mm512_and_si512(_mm512_srli_epi16(v, 4), mask));
    }
    // de = 2^(e - 128) per row, as quant_dot_mxfp4_x8_tiles.h's scales().
    const __m512i e = _mm512_cvtepu8_epi32(
        _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk0)),
                           _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk1))));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i subnormal =
        _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), _mm512_min_epi32(e, _mm512_set1_epi32(2)));
    const __m512 de = _mm512_castsi512_ps(_mm512_max_epi32(normal, subnormal));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const int8_t* xb = x.xq[t] + b * kBlock;
      __m512i sl = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[0], broadcast4_512(xb));
      __m512i sh = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi[0], broadcast4_512(xb + 16));
#pragma GCC unroll 4
      for (int k = 1; k < 4; ++k) {
        sl = _mm512_dpbusd_epi32(sl, lo[k], broadcast4_512(xb + 4 * k));
        sh = _mm512_dpbusd_epi32(sh, hi[k], broadcast4_512(xb + 16 + 4 * k));
      }
      const __m512i isum =
          _mm512_sub_epi32(_mm512_add_epi32(sl, sh), _mm512_set1_epi32(x.bias[t][b]));
      const __m512 scale = _mm512_mul_ps(de, _mm512_set1_ps(x.xd[t][b]));
      acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_cvtepi32_ps(isum), scale));
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out[t], acc[t]);
}

// x8_pairs_walk's kernel for one call: the groups, and every token's activations and bias sums.
struct Mxfp4PairKernel {
  const uint8_t* groups;
  size_t group_bytes;
  size_t blocks;
  const ActivationRows* x;
  const int32_t* bias_sums;

  void tile(size_t g, size_t t0, float* const* out) const {
    TokenTile<kPairTokens> tokens;
    for (int i = 0; i < kPairTokens; ++i) {
      const size_t t = t0 + static_cast<size_t>(i);
      tokens.xq[i] = x->qs + t * x->cols;
      tokens.xd[i] = x->d + t * blocks;
      tokens.bias[i] = bias_sums + t * blocks;
    }
    const uint8_t* g0 = groups + g * group_bytes;
    run_mxfp4_pair_tile(g0, g0 + group_bytes, blocks, tokens, out);
  }
};

}  // namespace
}  // namespace tandem::kernels::detail
