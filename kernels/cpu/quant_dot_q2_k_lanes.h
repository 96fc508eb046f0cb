// Q2_K plain rows for the tokens-in-lanes walk of quant_dot_x8_lanes.h (rows_lanes_dot): eight
// rows' super-block decoded once per call into the window, each quant as a byte (0..3), the
// 16-element groups' 4-bit scales, their 4-bit mins as eight int16 pairs, d and dmin per row; per
// super-block the reference's isum = sum_j scale_j * (sum over group j of q * xq), imin = sum_j
// min_j * bsums[j] and sum += ((dw * dx) * float(isum)) - ((dmin * dx) * float(imin)). Include
// after quant_dot_q2_q3_k_tiles.h (its scale and quant unpacking), as AVX2 code under the including
// file's flags; internal linkage.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot_q2_q3_k_tiles.h"
#include "kernels/cpu/quant_dot_x8_lanes.h"

namespace tandem::kernels::detail {
namespace {

struct Q2KLanes {
  static constexpr size_t kBlockBytes = kQ2KBlockBytes;
  static constexpr size_t kScaleQuads = 4;  // a scale and a min per 16-element group
  static constexpr int kMinPairs = 8;
  static constexpr int kMaxWeight = 3;  // largest weight in the window

  // Half H (elements 128H .. 128H + 127) of a super-block's quants to out.
  template <int H>
  [[gnu::always_inline]] static void half(const uint8_t* qs, int8_t* out) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * H));
    const __m256i none = _mm256_setzero_si256();
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 128 * H),
                       q23_k_quants<false, H, 0>(v, none));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 128 * H + 32),
                       q23_k_quants<false, H, 1>(v, none));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 128 * H + 64),
                       q23_k_quants<false, H, 2>(v, none));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 128 * H + 96),
                       q23_k_quants<false, H, 3>(v, none));
  }

  // Super-block b of rows 0 .. 7 (row i at w + i * row_bytes).
  static void unpack_rows(const uint8_t* w, size_t row_bytes, size_t b, LaneBlock& p) {
    alignas(32) int8_t vals[kLaneRows][kLaneSuper];
    for (size_t i = 0; i < kLaneRows; ++i) {
      const uint8_t* blk = w + i * row_bytes + b * kBlockBytes;
      __m256i sc16;
      __m256i mins16;
      q2_k_scales_mins(blk, sc16, mins16);
      alignas(32) int16_t sc[16];
      alignas(32) int32_t mins[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(sc), sc16);
      _mm256_store_si256(reinterpret_cast<__m256i*>(mins), mins16);
      for (size_t g = 0; g < 16; ++g) p.sc[g][i] = sc[g];
      for (size_t c = 0; c < 8; ++c) p.mins[c][i] = mins[c];
      half<0>(blk + 16, vals[i]);
      half<1>(blk + 16, vals[i]);
      const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(load_u32(blk + 80))));
      p.dw[i] = _mm_cvtss_f32(f);
      p.dmin[i] = _mm_cvtss_f32(_mm_movehdup_ps(f));
    }
    lanes_window_from_rows(vals, kScaleQuads, p);
  }
};

}  // namespace
}  // namespace tandem::kernels::detail
