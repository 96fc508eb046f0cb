// Scalar dequantize routines for ggml's grid i-quants, 256-element super-blocks of 8 sub-blocks of
// 32 (ib), each of 4 groups of 8 values (l); the grids and the sign rule are iq_grids.h's.
//
// Block layouts (little-endian; "f16" is an IEEE half), element e = 32 * ib + 8 * l + j:
//   block_iq2_xxs (66 B): f16 d; uint8 q[64]
//     sub-block ib: bytes q[8ib .. 8ib+3] are the grid indices of its 4 groups; the uint32 at
//     q + 8ib + 4 holds the 7 sign bits of group l at bit 7l and the scale s in its top 4 bits.
//     db = d * (0.5f + s) * 0.25f; y = db * kIq2xxsGrid[index][j] * (sign j ? -1 : 1).
//   block_iq2_xs (74 B): f16 d; uint16 qs[32]; uint8 scales[8]
//     qs[4ib + l]: grid index (low 9 bits) and 7 sign bits (top 7); groups 0-1 use the low nibble
//     of scales[ib], groups 2-3 the high one: db = d * (0.5f + nibble) * 0.25f.
//   block_iq2_s (82 B): f16 d; uint8 qs[32]; uint8 signs[32]; uint8 qh[8]; uint8 scales[8]
//     group l of ib: index qs[4ib + l] | bits 2l..2l+1 of qh[ib] << 8, all 8 sign bits in
//     signs[4ib + l]; scales as iq2_xs.
//   block_iq3_xxs (98 B): f16 d; uint8 qs[64]; uint8 scales_and_signs[32]
//     group l of ib: two 4-value grid entries qs[8ib + 2l], qs[8ib + 2l + 1]; the uint32 at
//     scales_and_signs + 4ib as iq2_xxs's second word; db = d * (0.5f + s) * 0.5f.
//   block_iq3_s (110 B): f16 d; uint8 qs[64]; uint8 qh[8]; uint8 signs[32]; uint8 scales[4]
//     group l of ib: entries qs[8ib + 2l + k] | bit 2l + k of qh[ib] << 8 (k = 0, 1), signs in
//     signs[4ib + l]; db = d * (1 + 2 * nibble ib % 2 of scales[ib / 2]).
//   block_iq1_s (50 B): f16 d; uint8 qs[32]; uint16 qh[8]
//     group l of ib: index qs[4ib + l] | bits 3l..3l+2 of qh[ib] << 8; dl = d * (2 * bits 12-14 of
//     qh[ib] + 1); delta = -kIq1Delta if bit 15 of qh[ib] else kIq1Delta; y = dl * (grid + delta).
//   block_iq1_m (56 B): uint8 qs[32]; uint8 qh[16]; uint16 sc[4]
//     d = the f16 made of the top nibbles of sc[0..3] (sc[0]'s lowest); group l of ib: index
//     qs[4ib + l] | bits 4(l%2)..4(l%2)+2 of qh[2ib + l/2] << 8, delta from bit 4(l%2)+3 of that
//     byte; groups 0-1 scale with d * (2 * bits 6(ib%2)..+2 of sc[ib/2] + 1), groups 2-3 with the
//     next 3 bits.
// Float ops are ggml's, in ggml's order; the build disables FMA contraction for this file.
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/dequantize_rows.h"
#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/iq_grids.h"

namespace tandem::kernels {

namespace {

constexpr size_t kSuper = 256;

// The sign byte of 7 stored sign bits (the low 7 of `bits`).
uint8_t iq_sign_byte(uint32_t bits) {
  return detail::kIqSignBytes.v[bits & 127];
}

// y[0..W) = db * grid[j] with value j negated where bit j of signs is set.
template <size_t W>
void signed_group(float db, const uint8_t* grid, uint8_t signs, float* y) {
  for (size_t j = 0; j < W; ++j) {
    y[j] = db * static_cast<float>(grid[j]) * ((signs >> j) & 1 ? -1.0f : 1.0f);
  }
}

// The IQ2_XS / IQ2_S scales of sub-block ib: db[0] for groups 0-1, db[1] for groups 2-3.
void iq2_scales(float d, uint8_t scales, float* db) {
  db[0] = d * (0.5f + static_cast<float>(scales & 0x0f)) * 0.25f;
  db[1] = d * (0.5f + static_cast<float>(scales >> 4)) * 0.25f;
}

// y[0..8) = dl * (grid[j] + delta).
void iq1_group(float dl, const int8_t* grid, float delta, float* y) {
  for (size_t j = 0; j < 8; ++j) y[j] = dl * (static_cast<float>(grid[j]) + delta);
}

}  // namespace

void dequantize_iq2_xxs(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 66, dst += kSuper) {
    const float d = fp16_to_fp32(load_le16(src));
    for (size_t ib = 0; ib < 8; ++ib) {
      const uint8_t* q = src + 2 + 8 * ib;
      const uint32_t aux = load_le32(q + 4);
      const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.25f;
      for (size_t l = 0; l < 4; ++l) {
        signed_group<8>(db, detail::kIq2xxsGrid.v[q[l]], iq_sign_byte(aux >> (7 * l)),
                        dst + 32 * ib + 8 * l);
      }
    }
  }
}

void dequantize_iq2_xs(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 74, dst += kSuper) {
    const float d = fp16_to_fp32(load_le16(src));
    for (size_t ib = 0; ib < 8; ++ib) {
      float db[2];
      iq2_scales(d, src[66 + ib], db);
      for (size_t l = 0; l < 4; ++l) {
        const uint16_t q = load_le16(src + 2 + 2 * (4 * ib + l));
        signed_group<8>(db[l / 2], detail::kIq2xsGrid.v[q & 511], iq_sign_byte(q >> 9),
                        dst + 32 * ib + 8 * l);
      }
    }
  }
}

void dequantize_iq2_s(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 82, dst += kSuper) {
    const float d = fp16_to_fp32(load_le16(src));
    const uint8_t* qs = src + 2;
    const uint8_t* signs = src + 34;
    const uint8_t* qh = src + 66;
    for (size_t ib = 0; ib < 8; ++ib) {
      float db[2];
      iq2_scales(d, src[74 + ib], db);
      for (size_t l = 0; l < 4; ++l) {
        const size_t index = qs[4 * ib + l] | ((qh[ib] >> (2 * l)) & 3u) << 8;
        signed_group<8>(db[l / 2], detail::kIq2sGrid.v[index], signs[4 * ib + l],
                        dst + 32 * ib + 8 * l);
      }
    }
  }
}

void dequantize_iq3_xxs(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 98, dst += kSuper) {
    const float d = fp16_to_fp32(load_le16(src));
    for (size_t ib = 0; ib < 8; ++ib) {
      const uint8_t* qs = src + 2 + 8 * ib;
      const uint32_t aux = load_le32(src + 66 + 4 * ib);
      const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
      for (size_t l = 0; l < 4; ++l) {
        const uint8_t signs = iq_sign_byte(aux >> (7 * l));
        float* y = dst + 32 * ib + 8 * l;
        signed_group<4>(db, detail::kIq3xxsGrid.v[qs[2 * l]], signs, y);
        signed_group<4>(db, detail::kIq3xxsGrid.v[qs[2 * l + 1]], static_cast<uint8_t>(signs >> 4),
                        y + 4);
      }
    }
  }
}

void dequantize_iq3_s(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 110, dst += kSuper) {
    const float d = fp16_to_fp32(load_le16(src));
    const uint8_t* qh = src + 66;
    const uint8_t* signs = src + 74;
    const uint8_t* scales = src + 106;
    for (size_t ib = 0; ib < 8; ++ib) {
      const uint8_t* qs = src + 2 + 8 * ib;
      const int nibble = (scales[ib / 2] >> (4 * (ib % 2))) & 0x0f;
      const float db = d * static_cast<float>(1 + 2 * nibble);
      for (size_t l = 0; l < 4; ++l) {
        const uint8_t s = signs[4 * ib + l];
        float* y = dst + 32 * ib + 8 * l;
        for (size_t k = 0; k < 2; ++k) {
          const size_t index = qs[2 * l + k] | ((qh[ib] >> (2 * l + k)) & 1u) << 8;
          signed_group<4>(db, detail::kIq3sGrid.v[index], static_cast<uint8_t>(s >> (4 * k)),
                          y + 4 * k);
        }
      }
    }
  }
}

void dequantize_iq1_s(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 50, dst += kSuper) {
    const float d = fp16_to_fp32(load_le16(src));
    for (size_t ib = 0; ib < 8; ++ib) {
      const uint16_t qh = load_le16(src + 34 + 2 * ib);
      const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
      const float delta = qh & 0x8000 ? -detail::kIq1Delta : detail::kIq1Delta;
      for (size_t l = 0; l < 4; ++l) {
        const size_t index = src[2 + 4 * ib + l] | ((qh >> (3 * l)) & 7u) << 8;
        iq1_group(dl, detail::kIq1sGrid.v[index], delta, dst + 32 * ib + 8 * l);
      }
    }
  }
}

void dequantize_iq1_m(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 56, dst += kSuper) {
    const uint8_t* qs = src;
    const uint8_t* qh = src + 32;
    uint16_t sc[4];
    for (size_t i = 0; i < 4; ++i) sc[i] = load_le16(src + 48 + 2 * i);
    const auto d_bits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                              ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    const float d = fp16_to_fp32(d_bits);
    for (size_t ib = 0; ib < 8; ++ib) {
      const unsigned shift = 6 * (ib % 2);
      const float dl[2] = {d * static_cast<float>(2 * ((sc[ib / 2] >> shift) & 7) + 1),
                           d * static_cast<float>(2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1)};
      for (size_t l = 0; l < 4; ++l) {
        const unsigned h = qh[2 * ib + l / 2] >> (4 * (l % 2));
        const size_t index = qs[4 * ib + l] | (h & 7u) << 8;
        const float delta = h & 8 ? -detail::kIq1Delta : detail::kIq1Delta;
        iq1_group(dl[l / 2], detail::kIq1sGrid.v[index], delta, dst + 32 * ib + 8 * l);
      }
    }
  }
}

}  // namespace tandem::kernels
