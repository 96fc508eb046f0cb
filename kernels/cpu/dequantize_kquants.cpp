// Scalar dequantize routines for ggml's 256-element super-block quants: Q2_K ... Q6_K, IQ4_XS.
//
// Block layouts (little-endian; "f16" is an IEEE half), element e in 0..255:
//   block_q2_K  (84 B): uint8 scales[16]; uint8 qs[64]; f16 d; f16 dmin
//     scales[e/16]: low nibble scale, high nibble min. q = (qs[32*h + l] >> 2*s) & 3 where
//     e = 128*h + 32*s + l (l < 32). y = (d * scale) * q - (dmin * min).
//   block_q3_K (110 B): uint8 hmask[32]; uint8 qs[64]; uint8 scales[12]; f16 d
//     16 6-bit scales, scale i = (low nibble of scales[i%8], taken from bit 4*(i/8)) |
//     (2 bits of scales[8 + i%4] at bit 2*(i/4)) << 4, minus 32. Low bits as q2_K; the high bit
//     is (hmask[e%32] >> e/32) & 1 and, when clear, subtracts 4. y = (d * scale[e/16]) * q.
//   block_q4_K (144 B): f16 d; f16 dmin; uint8 scales[12]; uint8 qs[128]
//     8 6-bit (scale, min) pairs, see unpack_scale_min(). q = (qs[32*c + l] >> 4*s) & 15 where
//     e = 64*c + 32*s + l. y = (d * scale[e/32]) * q - (dmin * min[e/32]).
//   block_q5_K (176 B): f16 d; f16 dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]
//     As q4_K plus a fifth bit (qh[e%32] >> e/32) & 1.
//   block_q6_K (210 B): uint8 ql[128]; uint8 qh[64]; int8 scales[16]; f16 d
//     e = 128*h + 32*s + l: low nibble (ql[64*h + 32*(s&1) + l] >> 4*(s/2)) & 15, high two bits
//     (qh[32*h + l] >> 2*s) & 3; q = (low | high << 4) - 32. y = (d * scales[e/16]) * q.
//   block_iq4_xs (136 B): f16 d; uint16 scales_h; uint8 scales_l[4]; uint8 qs[128]
//     sub-block j = e/32 has the 6-bit scale ls_j (iq4_xs_scale() in iq4_values.h); its quants
//     are laid out as one Q4_0 block at qs + 16j. y = (d * (ls_j - 32)) * kIq4Values[q].
// Float ops are ggml's, in ggml's order; the build disables FMA contraction for this file.
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/dequantize_rows.h"
#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/iq4_values.h"

namespace tandem::kernels {

namespace {

constexpr size_t kSuper = 256;

// The 6-bit scale and min of sub-block j (0..7) from q4_K/q5_K's 12 packed bytes: bytes 0-3 hold
// scales 0-3 in their low 6 bits, bytes 4-7 mins 0-3; for j >= 4 the low 4 bits come from byte
// 8 + j-4 (scale in the low nibble, min in the high one) and the top 2 bits from the top bits of
// bytes j-4 (scale) and j (min).
void unpack_scale_min(const uint8_t* s, int j, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

}  // namespace

void dequantize_q2_k(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 84, dst += kSuper) {
    const uint8_t* scales = src;
    const uint8_t* qs = src + 16;
    const float d = fp16_to_fp32(load_le16(src + 80));
    const float dmin = fp16_to_fp32(load_le16(src + 82));
    for (size_t e = 0; e < kSuper; ++e) {
      const size_t h = e / 128, s = (e / 32) % 4, l = e % 32;
      const uint8_t sc = scales[e / 16];
      const float dl = d * static_cast<float>(sc & 0x0f);
      const float ml = dmin * static_cast<float>(sc >> 4);
      const int q = (qs[32 * h + l] >> (2 * s)) & 3;
      dst[e] = dl * static_cast<float>(q) - ml;
    }
  }
}

void dequantize_q3_k(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 110, dst += kSuper) {
    const uint8_t* hmask = src;
    const uint8_t* qs = src + 32;
    const uint8_t* packed = src + 96;
    const float d = fp16_to_fp32(load_le16(src + 108));
    float dl[16];
    for (int i = 0; i < 16; ++i) {
      const int low = (packed[i % 8] >> (4 * (i / 8))) & 0x0f;
      const int high = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
      dl[i] = d * static_cast<float>((low | (high << 4)) - 32);
    }
    for (size_t e = 0; e < kSuper; ++e) {
      const size_t h = e / 128, s = (e / 32) % 4, l = e % 32;
      const int low = (qs[32 * h + l] >> (2 * s)) & 3;
      const int high_set = (hmask[l] >> (e / 32)) & 1;
      dst[e] = dl[e / 16] * static_cast<float>(low - (high_set ? 0 : 4));
    }
  }
}

void dequantize_q4_k(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 144, dst += kSuper) {
    const float d = fp16_to_fp32(load_le16(src));
    const float dmin = fp16_to_fp32(load_le16(src + 2));
    const uint8_t* scales = src + 4;
    const uint8_t* qs = src + 16;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc = 0, m = 0;
      unpack_scale_min(scales, j, &sc, &m);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = dmin * static_cast<float>(m);
      const uint8_t* q = qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      float* y = dst + 32 * j;
      for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>((q[l] >> shift) & 0x0f) - m1;
    }
  }
}

void dequantize_q5_k(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 176, dst += kSuper) {
    const float d = fp16_to_fp32(load_le16(src));
    const float dmin = fp16_to_fp32(load_le16(src + 2));
    const uint8_t* scales = src + 4;
    const uint8_t* qh = src + 16;
    const uint8_t* qs = src + 48;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc = 0, m = 0;
      unpack_scale_min(scales, j, &sc, &m);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = dmin * static_cast<float>(m);
      const uint8_t* q = qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      float* y = dst + 32 * j;
      for (int l = 0; l < 32; ++l) {
        const int v = ((q[l] >> shift) & 0x0f) | (((qh[l] >> j) & 1) << 4);
        y[l] = d1 * static_cast<float>(v) - m1;
      }
    }
  }
}

void dequantize_q6_k(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 210, dst += kSuper) {
    const uint8_t* ql = src;
    const uint8_t* qh = src + 128;
    const uint8_t* scales = src + 192;
    const float d = fp16_to_fp32(load_le16(src + 208));
    for (size_t e = 0; e < kSuper; ++e) {
      const size_t h = e / 128, s = (e / 32) % 4, l = e % 32;
      const int low = (ql[64 * h + 32 * (s % 2) + l] >> (4 * (s / 2))) & 0x0f;
      const int high = (qh[32 * h + l] >> (2 * s)) & 3;
      const float dl = d * static_cast<float>(static_cast<int8_t>(scales[e / 16]));
      dst[e] = dl * static_cast<float>((low | (high << 4)) - 32);
    }
  }
}

void dequantize_iq4_xs(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += detail::kIq4XsBytes, dst += kSuper) {
    const float d = fp16_to_fp32(load_le16(src));
    for (int j = 0; j < 8; ++j) {
      const float dl = d * static_cast<float>(detail::iq4_xs_scale(src, j));
      const uint8_t* qs = src + 8 + 16 * j;
      float* y = dst + 32 * j;
      for (int l = 0; l < 16; ++l) {
        y[l] = dl * static_cast<float>(detail::kIq4Values[qs[l] & 0x0f]);
        y[l + 16] = dl * static_cast<float>(detail::kIq4Values[qs[l] >> 4]);
      }
    }
  }
}

}  // namespace tandem::kernels
