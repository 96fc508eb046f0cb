// Q2_K and Q3_K plain rows for the tokens-in-lanes walk of quant_dot_x8_lanes.h (rows_lanes_dot):
// eight rows' super-block decoded once per call into the window, per row d (and Q2_K's dmin and
// the mins of its 16-element groups as eight int16 pairs). Two forms:
//  - scaled: each quant as a signed byte (Q2_K 0..3, Q3_K -4..3) beside the 16-element groups'
//    scales (Q3_K's minus 32), which the walk multiplies in per group;
//  - premultiplied (kPremultiplied): each quant times its group's scale, so one sum covers the
//    whole super-block and no group is scaled (as the AVX-512 batched tiles of
//    quant_dot_q2_q3_k_batched.h do): Q2_K scale * q in 0..45; Q3_K (32 - scale) * q in -128..124,
//    the negation of (scale - 32) * q (whose 128 would not fit a signed byte), undone by storing
//    -d: (-d * dx) * float(-isum) is the reference's (d * dx) * float(isum) exactly.
// Per super-block the reference's isum = sum_j scale_j * (sum over group j of q * xq) (Q3_K:
// scale_j - 32), Q2_K's imin = sum_j min_j * bsums[j], and sum += ((dw * dx) * float(isum)) -
// ((dmin * dx) * float(imin)) (Q3_K: (dw * dx) * float(isum)). Include after
// quant_dot_q2_q3_k_tiles.h (its scale and quant unpacking), as AVX2 code under the including
// file's flags; internal linkage.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot_q2_q3_k_tiles.h"
#include "kernels/cpu/quant_dot_x8_lanes.h"

namespace tandem::kernels::detail {
namespace {

template <bool kQ3, bool kPremultiplied>
struct Q23KLanes {
  static constexpr size_t kBlockBytes = kQ3 ? kQ3KBlockBytes : kQ2KBlockBytes;
  // The premultiplied form is one group of the whole super-block, with scale 1.
  static constexpr size_t kScaleQuads = kPremultiplied ? kLaneQuads : 4;
  static constexpr int kMinPairs = kQ3 ? 0 : 8;
  static constexpr int kMaxWeight = kPremultiplied ? (kQ3 ? 128 : 45) : (kQ3 ? 4 : 3);

  // Half H (elements 128H .. 128H + 127) of a super-block's quants (Q2_K: q; Q3_K: q - 4 + 4 =
  // the signed quant) to out.
  template <int H>
  [[gnu::always_inline]] static void half(const uint8_t* qs, __m256i hmask, int8_t* out) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * H));
    const __m256i offset = _mm256_set1_epi8(kQ3 ? 4 : 0);
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 128 * H),
                       _mm256_sub_epi8(q23_k_quants<kQ3, H, 0>(v, hmask), offset));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 128 * H + 32),
                       _mm256_sub_epi8(q23_k_quants<kQ3, H, 1>(v, hmask), offset));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 128 * H + 64),
                       _mm256_sub_epi8(q23_k_quants<kQ3, H, 2>(v, hmask), offset));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 128 * H + 96),
                       _mm256_sub_epi8(q23_k_quants<kQ3, H, 3>(v, hmask), offset));
  }

  // Super-block b of rows 0 .. 7 (row i at w + i * row_bytes).
  static void unpack_rows(const uint8_t* w, size_t row_bytes, size_t b, LaneBlock& p) {
    alignas(32) int8_t vals[kLaneRows][kLaneSuper];
    for (size_t i = 0; i < kLaneRows; ++i) {
      const uint8_t* blk = w + i * row_bytes + b * kBlockBytes;
      __m256i sc16;
      __m256i hmask = _mm256_setzero_si256();
      float d;
      if constexpr (kQ3) {
        sc16 = q3_k_scales(blk + 96);
        hmask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk));
        d = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(load_u16(blk + 108))));
      } else {
        __m256i mins16;
        q2_k_scales_mins(blk, sc16, mins16);
        alignas(32) int32_t mins[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(mins), mins16);
        for (size_t c = 0; c < 8; ++c) p.mins[c][i] = mins[c];
        const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(load_u32(blk + 80))));
        d = _mm_cvtss_f32(f);
        p.dmin[i] = _mm_cvtss_f32(_mm_movehdup_ps(f));
      }
      const uint8_t* qs = blk + (kQ3 ? 32 : 16);
      half<0>(qs, hmask, vals[i]);
      half<1>(qs, hmask, vals[i]);
      alignas(32) int16_t sc[16];
      if constexpr (kPremultiplied) {
        // Each group of 16 quants times its factor: Q2_K scale, Q3_K 32 - scale.
        _mm256_store_si256(reinterpret_cast<__m256i*>(sc),
                           kQ3 ? _mm256_sub_epi16(_mm256_setzero_si256(), sc16) : sc16);
        for (size_t g = 0; g < 16; ++g) {
          const __m256i q = _mm256_cvtepi8_epi16(
              _mm_load_si128(reinterpret_cast<const __m128i*>(vals[i] + 16 * g)));
          const __m256i u = _mm256_mullo_epi16(q, _mm256_set1_epi16(sc[g]));
          _mm_store_si128(
              reinterpret_cast<__m128i*>(vals[i] + 16 * g),
              _mm_packs_epi16(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1)));
        }
        p.sc[0][i] = 1;
        p.dw[i] = kQ3 ? -d : d;
      } else {
        _mm256_store_si256(reinterpret_cast<__m256i*>(sc), sc16);
        for (size_t g = 0; g < 16; ++g) p.sc[g][i] = sc[g];
        p.dw[i] = d;
      }
    }
    lanes_window_from_rows(vals, kScaleQuads, p);
  }
};

}  // namespace
}  // namespace tandem::kernels::detail
