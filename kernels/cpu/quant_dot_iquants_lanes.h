// The grid i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) on plain rows for the
// tokens-in-lanes walk of quant_dot_x8_lanes.h (rows_lanes_dot): eight rows' super-block decoded
// once per call into the window, each element as a signed byte, the rows' multipliers 2s + 1 per
// span (Rows::kSpan: 32 or 16 elements) and d * factor. IQ1's delta of each group of 8 rides in
// the weights, u = 8 * v + delta (v in -1..1), so that a span's sum of u * x is the reference's
// 8 * sum(v * x) + delta * sum(x). Include after quant_dot_iquants_tiles.h (the Rows types and
// their sub-block decode), as AVX2 code under the including file's flags (today the AVX2 kernels'
// many-token path: quant_dot_iquants_avx2.cpp); internal linkage.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot_x8_lanes.h"

namespace tandem::kernels::detail {
namespace {

template <class Rows>
struct IqLanes {
  static constexpr size_t kScaleQuads = Rows::kSpan / 4;
  static constexpr int kMinPairs = 0;
  static constexpr int kMaxWeight = Rows::kDelta ? 9 : 62;  // largest |weight| in the window

  // Super-block b of rows 0 .. 7 (row i at w + i * row_bytes).
  static void unpack_rows(const uint8_t* w, size_t row_bytes, size_t b, LaneBlock& p) {
    alignas(32) int8_t vals[kLaneRows][kLaneSuper];
    for (size_t i = 0; i < kLaneRows; ++i) {
      const uint8_t* blk = w + i * row_bytes + b * Rows::kBlockBytes;
#pragma GCC unroll 8
      for (size_t ib = 0; ib < 8; ++ib) {
        const IqVectors s = Rows::sub_block(blk, ib);
        __m256i u = s.v;
        if constexpr (Rows::kDelta) {
          // A group's delta is the sign of its delta multipliers (the pair lanes of its 8
          // elements).
          const __m256i negative = _mm256_cmpgt_epi16(_mm256_setzero_si256(), s.dls);
          const __m256i v2 = _mm256_add_epi8(u, u);
          const __m256i v4 = _mm256_add_epi8(v2, v2);
          u = _mm256_add_epi8(_mm256_add_epi8(v4, v4),
                              _mm256_or_si256(negative, _mm256_set1_epi8(1)));
        }
        _mm256_store_si256(reinterpret_cast<__m256i*>(vals[i] + 32 * ib), u);
        if constexpr (Rows::kSpan == 16) {
          p.sc[2 * ib][i] = static_cast<int16_t>(_mm256_extract_epi16(s.ls, 0));
          p.sc[2 * ib + 1][i] = static_cast<int16_t>(_mm256_extract_epi16(s.ls, 8));
        } else {
          p.sc[ib][i] = static_cast<int16_t>(_mm256_extract_epi16(s.ls, 0));
        }
      }
      const float d = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(Rows::d_bits(blk))));
      p.dw[i] = d * Rows::kFactor;
    }
    lanes_window_from_rows(vals, kScaleQuads, p);
  }
};

// The QuantDotFn contract for Rows: the tokens in the lanes of Isa from Isa::kMinTokens tokens,
// else (and for what the lanes leave) iq_dot's tiles and passes.
template <class Isa, class Rows>
void iq_lanes_dot(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                  float* y, size_t y_stride) {
  if (x.n_tokens < Isa::kMinTokens) {
    iq_dot<Rows>(w, row_bytes, rows, x, y, y_stride);
    return;
  }
  rows_lanes_dot<Isa, IqLanes<Rows>>(w, row_bytes, rows, x, y, y_stride, iq_dot<Rows>);
}

}  // namespace
}  // namespace tandem::kernels::detail
