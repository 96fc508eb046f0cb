// The block layouts of ggml's grid i-quants, decoded for the scalar code (dequantize_iquants.cpp,
// quant_dot_iquants_scalar.cpp): one place for where each field lives. A super-block is 256
// elements in 8 sub-blocks ib of 32, each of 4 groups l of 8 (element 32 * ib + 8 * l + j).
//
// Layouts (little-endian; "f16" an IEEE half):
//   iq2_xxs (66 B): f16 d; uint8 q[64]. Sub-block ib: q[8ib .. 8ib+3] index kIq2xxsGrid for its 4
//     groups; the uint32 at q + 8ib + 4 holds group l's 7 sign bits at bit 7l and the scale code
//     s in its top 4 bits.
//   iq2_xs (74 B): f16 d; uint16 qs[32]; uint8 scales[8]. qs[4ib + l]: kIq2xsGrid index (low 9
//     bits), 7 sign bits (top 7); groups 0-1 take the low nibble of scales[ib], 2-3 the high one.
//   iq2_s (82 B): f16 d; uint8 qs[32]; uint8 signs[32]; uint8 qh[8]; uint8 scales[8]. Group l of
//     ib: kIq2sGrid index qs[4ib + l] | bits 2l..2l+1 of qh[ib] << 8, its 8 sign bits
//     signs[4ib + l]; scales as iq2_xs.
//   iq3_xxs (98 B): f16 d; uint8 qs[64]; uint8 scales_and_signs[32]. Group l of ib: two 4-value
//     kIq3xxsGrid entries qs[8ib + 2l], qs[8ib + 2l + 1]; the uint32 at scales_and_signs + 4ib as
//     iq2_xxs's second word.
//   iq3_s (110 B): f16 d; uint8 qs[64]; uint8 qh[8]; uint8 signs[32]; uint8 scales[4]. Group l of
//     ib: kIq3sGrid entries qs[8ib + k] | bit k of qh[ib] << 8 (k = 2l, 2l + 1), signs[4ib + l];
//     the scale code is nibble ib % 2 of scales[ib / 2].
//   iq1_s (50 B): f16 d; uint8 qs[32]; uint16 qh[8]. Group l of ib: kIq1sGrid index qs[4ib + l] |
//     bits 3l..3l+2 of qh[ib] << 8; scale code bits 12-14 of qh[ib]; delta sign bit 15.
//   iq1_m (56 B): uint8 qs[32]; uint8 qh[16]; uint16 sc[4]. d = the f16 of the top nibbles of
//     sc[0..3] (sc[0]'s lowest); group l of ib: index qs[4ib + l] | the low 3 bits of nibble l % 2
//     of qh[2ib + l / 2] << 8, delta sign bit 3 of that nibble; scale code bits 6(ib%2)..+2 of
//     sc[ib / 2] for groups 0-1, the next 3 bits for groups 2-3.
// Scalar code only (it is shared inline between files; see quant_dot_kquants_tiles.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/iq_grids.h"

namespace tandem::kernels::detail {

// Sub-block ib decoded: v = each element's grid value with its sign applied (IQ1: the grid value,
// -1..1), per group l the scale code s (the multiplier is 2s + 1) and, for IQ1, the sign of its
// delta (+1 or -1; 0 for the other types).
struct IqSubBlock {
  int8_t v[32];
  int s[4];
  int delta[4];
};

// How a type turns d and the scale codes into values (ggml's float order, see
// dequantize_iquants.cpp) and into the integer dot product (quant_dot.h).
enum class IqScaleRule {
  kQuarter,  // IQ2_*: d * (0.5f + s) * 0.25f
  kHalf,     // IQ3_XXS: d * (0.5f + s) * 0.5f
  kOdd,      // IQ3_S: d * (2s + 1)
  kOddDelta  // IQ1_*: d * (2s + 1), times (v +- kIq1Delta)
};

struct IqBlockType {
  size_t block_bytes;
  IqScaleRule rule;
  uint16_t (*d_bits)(const uint8_t* blk);
  void (*decode)(const uint8_t* blk, size_t ib, IqSubBlock& out);
};

inline uint16_t iq_d_at_0(const uint8_t* blk) {
  return load_le16(blk);
}

// v[8l + j] for j < W from a W-value grid entry, negated where bit j of `signs` is set.
template <size_t W, typename T>
void iq_signed_values(const T* grid, unsigned signs, int8_t* v) {
  for (size_t j = 0; j < W; ++j) {
    v[j] = static_cast<int8_t>((signs >> j) & 1 ? -grid[j] : grid[j]);
  }
}

inline void iq2_xxs_decode(const uint8_t* blk, size_t ib, IqSubBlock& out) {
  const uint8_t* q = blk + 2 + 8 * ib;
  const uint32_t aux = load_le32(q + 4);
  for (size_t l = 0; l < 4; ++l) {
    out.s[l] = static_cast<int>(aux >> 28);
    out.delta[l] = 0;
    iq_signed_values<8>(kIq2xxsGrid.v[q[l]], kIqSignBytes.v[(aux >> (7 * l)) & 127], out.v + 8 * l);
  }
}

inline void iq2_xs_decode(const uint8_t* blk, size_t ib, IqSubBlock& out) {
  const uint8_t scales = blk[66 + ib];
  for (size_t l = 0; l < 4; ++l) {
    const uint16_t q = load_le16(blk + 2 + 2 * (4 * ib + l));
    out.s[l] = l < 2 ? scales & 0x0f : scales >> 4;
    out.delta[l] = 0;
    iq_signed_values<8>(kIq2xsGrid.v[q & 511], kIqSignBytes.v[q >> 9], out.v + 8 * l);
  }
}

inline void iq2_s_decode(const uint8_t* blk, size_t ib, IqSubBlock& out) {
  const uint8_t scales = blk[74 + ib];
  const uint8_t qh = blk[66 + ib];
  for (size_t l = 0; l < 4; ++l) {
    const size_t index = blk[2 + 4 * ib + l] | ((qh >> (2 * l)) & 3u) << 8;
    out.s[l] = l < 2 ? scales & 0x0f : scales >> 4;
    out.delta[l] = 0;
    iq_signed_values<8>(kIq2sGrid.v[index], blk[34 + 4 * ib + l], out.v + 8 * l);
  }
}

inline void iq3_xxs_decode(const uint8_t* blk, size_t ib, IqSubBlock& out) {
  const uint8_t* qs = blk + 2 + 8 * ib;
  const uint32_t aux = load_le32(blk + 66 + 4 * ib);
  for (size_t l = 0; l < 4; ++l) {
    const unsigned signs = kIqSignBytes.v[(aux >> (7 * l)) & 127];
    out.s[l] = static_cast<int>(aux >> 28);
    out.delta[l] = 0;
    iq_signed_values<4>(kIq3xxsGrid.v[qs[2 * l]], signs, out.v + 8 * l);
    iq_signed_values<4>(kIq3xxsGrid.v[qs[2 * l + 1]], signs >> 4, out.v + 8 * l + 4);
  }
}

inline void iq3_s_decode(const uint8_t* blk, size_t ib, IqSubBlock& out) {
  const uint8_t* qs = blk + 2 + 8 * ib;
  const uint8_t qh = blk[66 + ib];
  for (size_t l = 0; l < 4; ++l) {
    const unsigned signs = blk[74 + 4 * ib + l];
    out.s[l] = (blk[106 + ib / 2] >> (4 * (ib % 2))) & 0x0f;
    out.delta[l] = 0;
    for (size_t k = 0; k < 2; ++k) {
      const size_t index = qs[2 * l + k] | ((qh >> (2 * l + k)) & 1u) << 8;
      iq_signed_values<4>(kIq3sGrid.v[index], signs >> (4 * k), out.v + 8 * l + 4 * k);
    }
  }
}

inline void iq1_s_decode(const uint8_t* blk, size_t ib, IqSubBlock& out) {
  const uint16_t qh = load_le16(blk + 34 + 2 * ib);
  for (size_t l = 0; l < 4; ++l) {
    const size_t index = blk[2 + 4 * ib + l] | ((qh >> (3 * l)) & 7u) << 8;
    out.s[l] = (qh >> 12) & 7;
    out.delta[l] = qh & 0x8000 ? -1 : 1;
    iq_signed_values<8>(kIq1sGrid.v[index], 0, out.v + 8 * l);
  }
}

inline uint16_t iq1_m_d_bits(const uint8_t* blk) {
  uint16_t d = 0;
  for (unsigned k = 0; k < 4; ++k)
    d |= static_cast<uint16_t>((blk[48 + 2 * k + 1] >> 4) << (4 * k));
  return d;
}

inline void iq1_m_decode(const uint8_t* blk, size_t ib, IqSubBlock& out) {
  const uint16_t sc = load_le16(blk + 48 + 2 * (ib / 2));
  for (size_t l = 0; l < 4; ++l) {
    const unsigned h = blk[32 + 2 * ib + l / 2] >> (4 * (l % 2));
    const size_t index = blk[4 * ib + l] | (h & 7u) << 8;
    out.s[l] = (sc >> (6 * (ib % 2) + 3 * (l / 2))) & 7;
    out.delta[l] = h & 8 ? -1 : 1;
    iq_signed_values<8>(kIq1sGrid.v[index], 0, out.v + 8 * l);
  }
}

inline constexpr IqBlockType kIq2XxsBlocks{66, IqScaleRule::kQuarter, iq_d_at_0, iq2_xxs_decode};
inline constexpr IqBlockType kIq2XsBlocks{74, IqScaleRule::kQuarter, iq_d_at_0, iq2_xs_decode};
inline constexpr IqBlockType kIq2SBlocks{82, IqScaleRule::kQuarter, iq_d_at_0, iq2_s_decode};
inline constexpr IqBlockType kIq3XxsBlocks{98, IqScaleRule::kHalf, iq_d_at_0, iq3_xxs_decode};
inline constexpr IqBlockType kIq3SBlocks{110, IqScaleRule::kOdd, iq_d_at_0, iq3_s_decode};
inline constexpr IqBlockType kIq1SBlocks{50, IqScaleRule::kOddDelta, iq_d_at_0, iq1_s_decode};
inline constexpr IqBlockType kIq1MBlocks{56, IqScaleRule::kOddDelta, iq1_m_d_bits, iq1_m_decode};

}  // namespace tandem::kernels::detail
