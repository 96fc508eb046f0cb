// The Q6_K x8 layout (quant_dot.h) for the tokens-in-lanes walk of quant_dot_x8_lanes.h: a
// group's super-block unpacked into the window (quants q - 32 as signed bytes in sub-block / quad /
// row order, the int8 scale of each 16-element group, d per row, the bias of the unsigned
// activations). Include after quant_dot_q6_k_x8_tiles.h (its layout constants and quant
// unpacking), as AVX2 code under the including file's flags; internal linkage.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot_q6_k_x8_tiles.h"
#include "kernels/cpu/quant_dot_x8_lanes.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kQ6KX8BlockBytes = kBlockBytes;

struct Q6KLanes {
  static constexpr size_t kBlockBytes = kQ6KX8BlockBytes;
  static constexpr size_t kScaleQuads = 4;  // a scale per 16-element group
  static constexpr int kMinPairs = 0;
  static constexpr int kMaxWeight = 32;  // largest |weight| in the window (q - 32)

  static void unpack(const uint8_t* blk, LaneBlock& p) {
    const __m256i offset = _mm256_set1_epi8(32);
    // wsum[s]: the sum of group s's weights q - 32 per row.
    __m256i wsum[16];
#pragma GCC unroll 16
    for (int s = 0; s < 16; ++s) wsum[s] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const uint8_t* chunk = blk + kChunkOffset + kChunkBytes * c;
      __m256i h = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 32 * m));
        if (m % 2 == 0) {
          h = _mm256_loadu_si256(
              reinterpret_cast<const __m256i*>(chunk + kTopOffset + 32 * (m / 2)));
        }
        __m256i lo, hi;
        q6_k_x8_quants(v, h, 4 * (m % 2), lo, hi);
        lo = _mm256_sub_epi8(lo, offset);
        hi = _mm256_sub_epi8(hi, offset);
        _mm256_store_si256(reinterpret_cast<__m256i*>(p.q[16 * c + m]), lo);
        _mm256_store_si256(reinterpret_cast<__m256i*>(p.q[16 * c + 8 + m]), hi);
        wsum[4 * c + m / 4] = add_lane_bytes(wsum[4 * c + m / 4], lo);
        wsum[4 * c + 2 + m / 4] = add_lane_bytes(wsum[4 * c + 2 + m / 4], hi);
      }
    }
    __m256i bias = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int s = 0; s < 16; ++s) {
      const __m256i scale = _mm256_cvtepi8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + kScaleOffset + 8 * s)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(p.sc[s]), scale);
      bias = _mm256_add_epi32(bias, _mm256_mullo_epi32(scale, wsum[s]));
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.bias), _mm256_slli_epi32(bias, 7));
    _mm256_store_ps(p.dw, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk))));
  }
};

}  // namespace
}  // namespace tandem::kernels::detail
