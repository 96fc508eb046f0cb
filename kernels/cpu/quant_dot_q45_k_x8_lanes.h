// The Q4_K and Q5_K x8 layouts (quant_dot.h) for the tokens-in-lanes walk of
// quant_dot_x8_lanes.h: a group's super-block unpacked into the window (quants as bytes,
// 0..31, in sub-block / quad / row order; the scales, mins, d and dmin per row; the bias of the
// unsigned activations). Include after quant_dot_q45_k_x8_tiles.h (the formats), as AVX2 code under
// the including file's flags; internal linkage.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot_q45_k_x8_tiles.h"
#include "kernels/cpu/quant_dot_q4_k_x8_scales.h"
#include "kernels/cpu/quant_dot_x8_lanes.h"

namespace tandem::kernels::detail {
namespace {

// Format: Q4KX8Format or Q5KX8Format.
template <class Format>
struct Q45KLanes {
  static constexpr size_t kBlockBytes = Format::kBlockBytes;
  static constexpr size_t kScaleQuads = 8;              // a scale per 32-element sub-block
  static constexpr int kMinPairs = 4;                   // (min_2c, min_2c+1) per 64 elements
  static constexpr int kMaxWeight = Format::kQuantMax;  // largest |weight| in the window

  static void unpack(const uint8_t* blk, LaneBlock& p) {
    __m256i wsum[8];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const uint8_t* chunk = blk + kQuantOffset + Format::kChunkBytes * c;
      __m256i hb = _mm256_setzero_si256();
      __m256i lo_sum = _mm256_setzero_si256();
      __m256i hi_sum = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m) {
        __m256i wl, wh;
        q45_k_x8_quad<Format>(chunk, m, hb, wl, wh);
        _mm256_store_si256(reinterpret_cast<__m256i*>(p.q[16 * c + m]), wl);
        _mm256_store_si256(reinterpret_cast<__m256i*>(p.q[16 * c + 8 + m]), wh);
        lo_sum = add_lane_bytes(lo_sum, wl);
        hi_sum = add_lane_bytes(hi_sum, wh);
      }
      wsum[2 * c] = lo_sum;
      wsum[2 * c + 1] = hi_sum;
    }
    alignas(32) uint8_t sc[64];
    alignas(32) uint8_t mn[64];
    q4_k_x8_scale_bytes(blk, sc, mn);
    __m256i bias = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m256i s =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 8 * j)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(p.sc[j]), s);
      bias = _mm256_add_epi32(bias, _mm256_mullo_epi32(s, wsum[j]));
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.bias), _mm256_slli_epi32(bias, 7));
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m128i even = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn + 16 * c));
      const __m128i odd = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn + 16 * c + 8));
      _mm256_store_si256(reinterpret_cast<__m256i*>(p.mins[c]),
                         _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(even, odd)));
    }
    _mm256_store_ps(p.dw, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk))));
    _mm256_store_ps(p.dmin,
                    _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16))));
  }
};

}  // namespace
}  // namespace tandem::kernels::detail
