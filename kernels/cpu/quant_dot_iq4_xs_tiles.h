// The SIMD dot product of IQ4_XS weights with Q8_K activations, bit-identical to dot_iq4_xs_scalar
// (quant_dot_iq4_xs_scalar.cpp): the per-row isums for quant_dot_kquants_tiles.h's d_isum_tile and
// dot_rows walk (its tiles of R rows x T tokens, row chunks and prefetch), instantiated by
// quant_dot_kquants_avx2.cpp and quant_dot_kquants_avx512_vnni.cpp under their own -m flags. A file
// includes it after defining kq_madd_add, as for quant_dot_kquants_tiles.h (see there, also for why
// everything here has internal linkage).
//
// Exactness: per 32-element sub-block j and token, the weights are unpacked to their signed
// values v = kIq4Values[q] (-127..113, vpshufb) and multiplied as |x| (0..128 as unsigned bytes,
// so -128 is exact too) times v with x's sign (-127..127): maddubs' pair sums are at most
// 2 * 128 * 127 < 32767, so they never saturate. kq_madd_add multiplies them with ls_j - 32
// (-32..31) into int32 lanes: |isum| <= 256 * 128 * 127 * 32 < 2^31, exact. The float combine,
// (dw * dx) * float(isum) added in block order, is the reference's, one (row, token) per lane.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/quant_dot_kquants_tiles.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kIq4XsBlockBytes = 136;  // f16 d, uint16 scales_h, scales_l[4], qs[128]

// The 8 sub-block scales ls_j - 32 of the super-block at blk as int16 lanes 0..7 of both 128-bit
// halves: ls_j's low nibble is nibble j of scales_l (low nibble first), its top two bits are bits
// 2j, 2j + 1 of scales_h, taken as (scales_h << (14 - 2j)) >> 14 in 16-bit lanes.
[[gnu::always_inline]] inline __m256i iq4_xs_scales(const uint8_t* blk) {
  uint16_t scales_h;
  std::memcpy(&scales_h, blk + 2, sizeof(scales_h));
  uint32_t scales_l;
  std::memcpy(&scales_l, blk + 4, sizeof(scales_l));
  const __m128i l = _mm_cvtsi32_si128(static_cast<int>(scales_l));
  const __m128i low4 = _mm_set1_epi8(0x0f);
  const __m128i nibbles =
      _mm_unpacklo_epi8(_mm_and_si128(l, low4), _mm_and_si128(_mm_srli_epi16(l, 4), low4));
  const __m128i top = _mm_srli_epi16(
      _mm_mullo_epi16(_mm_set1_epi16(static_cast<int16_t>(scales_h)),
                      _mm_setr_epi16(1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1)),
      14);
  const __m128i ls = _mm_or_si128(_mm_cvtepu8_epi16(nibbles), _mm_slli_epi16(top, 4));
  return _mm256_broadcastsi128_si256(_mm_sub_epi16(ls, _mm_set1_epi16(32)));
}

// Sub-block J's 32 values in element order as signed bytes: the low nibbles of its 16 quant bytes
// in the low 128 bits, the high nibbles in the high 128 bits (a 64-bit shift by 0 or 4 per half).
template <int J>
[[gnu::always_inline]] inline __m256i iq4_xs_values(const uint8_t* qs) {
  const __m256i values =
      _mm256_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,  //
                       -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
  const __m256i v =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * J)));
  const __m256i codes = _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4)),
                                         _mm256_set1_epi8(0x0f));
  return _mm256_shuffle_epi8(values, codes);
}

// Sub-block J of one row: acc[t] += (ls_J - 32) * the value products with token t.
template <int T, int J>
[[gnu::always_inline]] inline void iq4_xs_step(const uint8_t* qs, __m256i scales,
                                               const int8_t* const* xq, __m256i* acc) {
  const __m256i v = iq4_xs_values<J>(qs);
  const __m256i s = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(0x0100 + 0x0202 * J));
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[t] + 32 * J));
    const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(x), _mm256_sign_epi8(v, x));
    acc[t] = kq_madd_add(acc[t], p, s);
    keep_in_register(acc[t]);
  }
}

// IQ4_XS's isum per row and token (d_isum_tile's Rows).
struct Iq4XsRows {
  static constexpr size_t kBlockBytes = kIq4XsBlockBytes;
  static constexpr size_t kDOffset = 0;

  template <int T>
  [[gnu::always_inline]] static void row_isums(const uint8_t* blk, const int8_t* const* xq,
                                               const TokenGroup&, size_t, __m256i* acc) {
    const __m256i scales = iq4_xs_scales(blk);
    const uint8_t* qs = blk + 8;
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_si256();
    iq4_xs_step<T, 0>(qs, scales, xq, acc);
    iq4_xs_step<T, 1>(qs, scales, xq, acc);
    iq4_xs_step<T, 2>(qs, scales, xq, acc);
    iq4_xs_step<T, 3>(qs, scales, xq, acc);
    iq4_xs_step<T, 4>(qs, scales, xq, acc);
    iq4_xs_step<T, 5>(qs, scales, xq, acc);
    iq4_xs_step<T, 6>(qs, scales, xq, acc);
    iq4_xs_step<T, 7>(qs, scales, xq, acc);
  }
};

using Iq4XsTiles = DIsumTiles<Iq4XsRows>;

}  // namespace
}  // namespace tandem::kernels::detail
