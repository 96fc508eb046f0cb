// Q3_K plain rows for the tokens-in-lanes walk of quant_dot_x8_lanes.h (rows_lanes_dot): eight
// rows' super-block decoded once per call into the window, each quant as a signed byte (-4..3), the
// 16-element groups' scales minus 32 and d per row; per super-block the reference's
// isum = sum_g (scale_g - 32) * (sum over group g of q * xq) and sum += (dw * dx) * float(isum),
// as Q6_K. Include after quant_dot_q2_q3_k_tiles.h (its scale and quant unpacking), as AVX2 code
// under the including file's flags; internal linkage.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot_q2_q3_k_tiles.h"
#include "kernels/cpu/quant_dot_x8_lanes.h"

namespace tandem::kernels::detail {
namespace {

struct Q3KLanes {
  static constexpr size_t kBlockBytes = kQ3KBlockBytes;
  static constexpr size_t kScaleQuads = 4;  // a scale per 16-element group
  static constexpr int kMinPairs = 0;
  static constexpr int kMaxWeight = 4;  // largest |weight| in the window

  // Half H (elements 128H .. 128H + 127) of a super-block's quants, q in -4..3, to out.
  template <int H>
  [[gnu::always_inline]] static void half(const uint8_t* qs, __m256i hmask, int8_t* out) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * H));
    const __m256i four = _mm256_set1_epi8(4);
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 128 * H),
                       _mm256_sub_epi8(q23_k_quants<true, H, 0>(v, hmask), four));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 128 * H + 32),
                       _mm256_sub_epi8(q23_k_quants<true, H, 1>(v, hmask), four));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 128 * H + 64),
                       _mm256_sub_epi8(q23_k_quants<true, H, 2>(v, hmask), four));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 128 * H + 96),
                       _mm256_sub_epi8(q23_k_quants<true, H, 3>(v, hmask), four));
  }

  // Super-block b of rows 0 .. 7 (row i at w + i * row_bytes).
  static void unpack_rows(const uint8_t* w, size_t row_bytes, size_t b, LaneBlock& p) {
    alignas(32) int8_t vals[kLaneRows][kLaneSuper];
    for (size_t i = 0; i < kLaneRows; ++i) {
      const uint8_t* blk = w + i * row_bytes + b * kBlockBytes;
      alignas(32) int16_t sc[16];
      _mm256_store_si256(reinterpret_cast<__m256i*>(sc), q3_k_scales(blk + 96));
      for (size_t g = 0; g < 16; ++g) p.sc[g][i] = sc[g];
      const __m256i hmask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk));
      half<0>(blk + 32, hmask, vals[i]);
      half<1>(blk + 32, hmask, vals[i]);
      p.dw[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(load_u16(blk + 108))));
    }
    lanes_window_from_rows(vals, kScaleQuads, p);
  }
};

}  // namespace
}  // namespace tandem::kernels::detail
