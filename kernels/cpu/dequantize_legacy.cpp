// Scalar dequantize routines for ggml's 32-element quants: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4,
// IQ4_NL.
//
// Block layouts (little-endian; "f16" is an IEEE half):
//   block_q4_0 (18 B): f16 d;          uint8 qs[16]
//   block_q4_1 (20 B): f16 d; f16 m;   uint8 qs[16]
//   block_q5_0 (22 B): f16 d;          uint32 qh; uint8 qs[16]
//   block_q5_1 (24 B): f16 d; f16 m;   uint32 qh; uint8 qs[16]
//   block_q8_0 (34 B): f16 d;          int8 qs[32]
//   block_mxfp4 (17 B): uint8 e (E8M0); uint8 qs[16]; value kvalues[q] * 2^(e - 128), kvalues the
//                       E2M1 values doubled (ggml's kvalues_mxfp4 and ggml_e8m0_to_fp32_half)
//   block_iq4_nl (18 B): f16 d; uint8 qs[16]; value d * kIq4Values[q] (iq4_values.h)
// Element j < 16 takes the low nibble of qs[j], element j + 16 the high nibble; for the 5-bit
// types bit j of qh is the fifth bit of element j. Values: q4_0 (q - 8) * d, q4_1 q * d + m,
// q5_0 (q - 16) * d, q5_1 q * d + m, q8_0 q * d — the same float ops in the same order as ggml.
#include <bit>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/dequantize_rows.h"
#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/iq4_values.h"
#include "kernels/cpu/mxfp4_values.h"

namespace tandem::kernels {

namespace {
constexpr size_t kBlock = 32;
constexpr size_t kHalf = kBlock / 2;
using detail::e8m0_half;
using detail::kMxfp4Values;
}  // namespace

void dequantize_q4_0(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 18, dst += kBlock) {
    const float d = fp16_to_fp32(load_le16(src));
    const uint8_t* qs = src + 2;
    for (size_t j = 0; j < kHalf; ++j) {
      dst[j] = static_cast<float>((qs[j] & 0x0f) - 8) * d;
      dst[j + kHalf] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 20, dst += kBlock) {
    const float d = fp16_to_fp32(load_le16(src));
    const float m = fp16_to_fp32(load_le16(src + 2));
    const uint8_t* qs = src + 4;
    for (size_t j = 0; j < kHalf; ++j) {
      dst[j] = static_cast<float>(qs[j] & 0x0f) * d + m;
      dst[j + kHalf] = static_cast<float>(qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_q5_0(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 22, dst += kBlock) {
    const float d = fp16_to_fp32(load_le16(src));
    const uint32_t qh = load_le32(src + 2);
    const uint8_t* qs = src + 6;
    for (size_t j = 0; j < kHalf; ++j) {
      const int lo = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + kHalf)) & 1u) << 4);
      dst[j] = static_cast<float>(lo - 16) * d;
      dst[j + kHalf] = static_cast<float>(hi - 16) * d;
    }
  }
}

void dequantize_q5_1(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 24, dst += kBlock) {
    const float d = fp16_to_fp32(load_le16(src));
    const float m = fp16_to_fp32(load_le16(src + 2));
    const uint32_t qh = load_le32(src + 4);
    const uint8_t* qs = src + 8;
    for (size_t j = 0; j < kHalf; ++j) {
      const uint32_t lo = (qs[j] & 0x0fu) | (((qh >> j) & 1u) << 4);
      const uint32_t hi = (qs[j] >> 4) | (((qh >> (j + kHalf)) & 1u) << 4);
      dst[j] = static_cast<float>(lo) * d + m;
      dst[j + kHalf] = static_cast<float>(hi) * d + m;
    }
  }
}

void dequantize_q8_0(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 34, dst += kBlock) {
    const float d = fp16_to_fp32(load_le16(src));
    const uint8_t* qs = src + 2;
    for (size_t j = 0; j < kBlock; ++j) {
      dst[j] = static_cast<float>(static_cast<int8_t>(qs[j])) * d;
    }
  }
}

// The products are exact (a small integer times a power of two) except where they overflow: with
// e = 255 every |value| >= 2 becomes an infinity of its sign, +-1 gives +-2^127.
void dequantize_mxfp4(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 17, dst += kBlock) {
    const float d = e8m0_half(src[0]);
    const uint8_t* qs = src + 1;
    for (size_t j = 0; j < kHalf; ++j) {
      dst[j] = static_cast<float>(kMxfp4Values[qs[j] & 0x0f]) * d;
      dst[j + kHalf] = static_cast<float>(kMxfp4Values[qs[j] >> 4]) * d;
    }
  }
}

void dequantize_iq4_nl(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 18, dst += kBlock) {
    const float d = fp16_to_fp32(load_le16(src));
    const uint8_t* qs = src + 2;
    for (size_t j = 0; j < kHalf; ++j) {
      dst[j] = d * static_cast<float>(detail::kIq4Values[qs[j] & 0x0f]);
      dst[j + kHalf] = d * static_cast<float>(detail::kIq4Values[qs[j] >> 4]);
    }
  }
}

}  // namespace tandem::kernels
