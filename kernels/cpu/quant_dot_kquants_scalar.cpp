// Scalar reference dot products of K-quant weights (Q2_K ... Q6_K) with Q8_K activations.
//
// They implement quant_dot.h's reference semantics literally: per 256-element super-block an
// exact int32 integer part, then the float combine in the order written there, accumulated in
// block order into a float starting at 0.0f. The build compiles this file with -ffp-contract=off,
// so no multiply-add is fused. Block layouts: see dequantize_kquants.cpp.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {

namespace {

constexpr size_t kSuper = 256;          // elements per super-block
constexpr size_t kQ2KBlockBytes = 84;   // scales[16], qs[64], f16 d, f16 dmin
constexpr size_t kQ3KBlockBytes = 110;  // hmask[32], qs[64], scales[12], f16 d
constexpr size_t kQ4KBlockBytes = 144;  // f16 d, f16 dmin, scales[12], qs[128]
constexpr size_t kQ5KBlockBytes = 176;  // f16 d, f16 dmin, scales[12], qh[32], qs[128]
constexpr size_t kQ6KBlockBytes = 210;  // ql[128], qh[64], int8 scales[16], f16 d

// The 8 6-bit (scale, min) pairs of a Q4_K/Q5_K super-block from its 12 packed bytes: sub-blocks
// 0-3 in the low 6 bits of bytes 0-3 (scale) and 4-7 (min); sub-blocks 4-7 take their low 4 bits
// from bytes 8-11 (scale low nibble, min high nibble) and their top 2 bits from the top bits of
// bytes 0-3 (scale) and 4-7 (min).
void unpack_scales_mins(const uint8_t* s, int* scales, int* mins) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = s[j] & 63;
    mins[j] = s[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    scales[j] = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    mins[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// The Q8_K activation super-block b of token t.
struct ActivationBlock {
  const int8_t* qs;      // 256 quants
  float d;               // scale
  const int16_t* bsums;  // 16 sums of 16 quants
};

ActivationBlock activation_block(const ActivationRows& x, size_t t, size_t b) {
  const size_t blocks = x.cols / kSuper;
  return {x.qs + t * x.cols + b * kSuper, x.d[t * blocks + b],
          x.bsums + t * (x.cols / kQ8_KSumElements) + b * (kSuper / kQ8_KSumElements)};
}

// One Q4_K / Q5_K super-block, unpacked: its fp16 scales as floats, its 8 (scale, min) pairs, and
// its quants: qs in the plain layout (sub-block j = the low (j even) or high (j odd) nibbles of
// qs[32 * (j / 2) + l]), qh (Q5_K's fifth bits, bit j of qh[l]) or null.
struct Q45KBlock {
  float dw;
  float dmin;
  int scales[8];
  int mins[8];
  const uint8_t* qs;
  const uint8_t* qh;
};

Q45KBlock plain_block(const uint8_t* blk, bool has_high_bits) {
  Q45KBlock k;
  k.dw = fp16_to_fp32(load_le16(blk));
  k.dmin = fp16_to_fp32(load_le16(blk + 2));
  unpack_scales_mins(blk + 4, k.scales, k.mins);
  k.qh = has_high_bits ? blk + 16 : nullptr;
  k.qs = blk + (has_high_bits ? 48 : 16);
  return k;
}

// The reference's term of one super-block: ((dw * dx) * float(isum)) - ((dmin * dx) * float(imin)).
float q45_k_term(const Q45KBlock& k, const ActivationBlock& a) {
  int32_t isum = 0;
  int32_t imin = 0;
  for (int j = 0; j < 8; ++j) {
    const uint8_t* q = k.qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    const int8_t* xq = a.qs + 32 * j;
    int32_t sub = 0;
    for (int l = 0; l < 32; ++l) {
      int v = (q[l] >> shift) & 0x0f;
      if (k.qh != nullptr) v |= ((k.qh[l] >> j) & 1) << 4;
      sub += v * xq[l];
    }
    isum += k.scales[j] * sub;
    imin += k.mins[j] * (a.bsums[2 * j] + a.bsums[2 * j + 1]);
  }
  return ((k.dw * a.d) * static_cast<float>(isum)) - ((k.dmin * a.d) * static_cast<float>(imin));
}

// Q4_K and Q5_K differ only in their quants: Q5_K (has_high_bits) adds a fifth bit from qh and
// moves qs 32 bytes further.
float dot_q4_q5_k_row(const uint8_t* row, size_t block_bytes, bool has_high_bits,
                      const ActivationRows& x, size_t t) {
  const size_t blocks = x.cols / kSuper;
  float sum = 0.0f;
  for (size_t b = 0; b < blocks; ++b) {
    sum += q45_k_term(plain_block(row + b * block_bytes, has_high_bits), activation_block(x, t, b));
  }
  return sum;
}

// ---- The Q4_K and Q5_K x8 layouts (quant_dot.h): one 128-byte header of d, dmin and the unpacked
// (scale, min) entries, then per 64 elements a chunk of 256 quant bytes (Q5_K: and 64 bytes of
// fifth bits).
constexpr size_t kGroupRows = 8;
constexpr size_t kQ4KX8Bytes = kGroupRows * kQ4KBlockBytes;
constexpr size_t kQ5KX8Bytes = kGroupRows * kQ5KBlockBytes;
constexpr size_t kQ45KX8Header = 128;

// Row r's (scale, min) pair of sub-block j, entry e = 8 * j + r of the layout's 64.
uint8_t x8_nibble(const uint8_t* bytes, size_t e) {
  return e < 32 ? bytes[e] & 0x0f : bytes[e - 32] >> 4;
}

int x8_scale(const uint8_t* blk, size_t e) {
  const uint8_t high = blk[96 + e % 32] >> (e < 32 ? 0 : 2);
  return x8_nibble(blk + 32, e) | ((high & 3) << 4);
}

int x8_min(const uint8_t* blk, size_t e) {
  const uint8_t high = blk[96 + e % 32] >> (e < 32 ? 4 : 6);
  return x8_nibble(blk + 64, e) | ((high & 3) << 4);
}

// The bytes of one 64-element chunk: 256 (Q4_K) or 320 (Q5_K).
constexpr size_t x8_chunk_bytes(bool has_high_bits) {
  return has_high_bits ? 320 : 256;
}

// The byte offset, in a group's super-block, of row r's quant byte l (l < 128).
size_t x8_quant_offset(size_t r, size_t l, bool has_high_bits) {
  return kQ45KX8Header + x8_chunk_bytes(has_high_bits) * (l / 32) + 32 * (l % 32 / 4) + 4 * r +
         l % 4;
}

// Where a Q5_K x8 super-block keeps the fifth bit of row r's element e: (byte, bit).
struct X8HighBit {
  size_t byte;
  int bit;
};

X8HighBit q5_k_x8_high_bit(size_t r, size_t e) {
  const size_t c = e / 64, half = e % 64 / 32, m = e % 32 / 4, j = e % 4;
  return {kQ45KX8Header + 320 * c + 256 + 32 * (m / 4) + 4 * r + j,
          static_cast<int>(m % 4 + 4 * half)};
}

// Row i's plain Q4_K / Q5_K super-block rebuilt from a group's x8 super-block into qs (128 bytes)
// and, with high bits, qh (32 bytes), as the Q45KBlock the plain term reads.
Q45KBlock x8_block(const uint8_t* blk, size_t i, bool has_high_bits, uint8_t* qs, uint8_t* qh) {
  Q45KBlock k;
  k.dw = fp16_to_fp32(load_le16(blk + 2 * i));
  k.dmin = fp16_to_fp32(load_le16(blk + 16 + 2 * i));
  for (size_t j = 0; j < 8; ++j) {
    k.scales[j] = x8_scale(blk, 8 * j + i);
    k.mins[j] = x8_min(blk, 8 * j + i);
  }
  for (size_t l = 0; l < 128; ++l) qs[l] = blk[x8_quant_offset(i, l, has_high_bits)];
  k.qs = qs;
  k.qh = nullptr;
  if (has_high_bits) {
    std::memset(qh, 0, 32);
    for (size_t e = 0; e < kSuper; ++e) {
      const X8HighBit h = q5_k_x8_high_bit(i, e);
      const size_t sub = e / 32;  // plain: bit `sub` of qh[e % 32]
      qh[e % 32] |= static_cast<uint8_t>(((blk[h.byte] >> h.bit) & 1) << sub);
    }
    k.qh = qh;
  }
  return k;
}

// The x8 repack of Q4_K (plain blocks of 144 bytes) or Q5_K (176, has_high_bits).
void repack_q45_k_x8(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups,
                     bool has_high_bits) {
  const size_t plain_bytes = has_high_bits ? kQ5KBlockBytes : kQ4KBlockBytes;
  const size_t x8_bytes = kGroupRows * plain_bytes;
  const size_t blocks = row_bytes / plain_bytes;
  const size_t n_groups = (rows + kGroupRows - 1) / kGroupRows;
  std::memset(groups, 0, n_groups * blocks * x8_bytes);
  for (size_t r = 0; r < rows; ++r) {
    const size_t i = r % kGroupRows;
    for (size_t b = 0; b < blocks; ++b) {
      const uint8_t* src = w + r * row_bytes + b * plain_bytes;
      uint8_t* dst = groups + (r / kGroupRows * blocks + b) * x8_bytes;
      std::memcpy(dst + 2 * i, src, 2);
      std::memcpy(dst + 16 + 2 * i, src + 2, 2);
      int scales[8], mins[8];
      unpack_scales_mins(src + 4, scales, mins);
      for (size_t j = 0; j < 8; ++j) {
        const size_t e = 8 * j + i;
        const size_t k = e % 32;
        const int nib_shift = e < 32 ? 0 : 4;
        dst[32 + k] |= static_cast<uint8_t>((scales[j] & 0x0f) << nib_shift);
        dst[64 + k] |= static_cast<uint8_t>((mins[j] & 0x0f) << nib_shift);
        const int high_shift = e < 32 ? 0 : 2;
        dst[96 + k] |= static_cast<uint8_t>(((scales[j] >> 4) << high_shift) |
                                            ((mins[j] >> 4) << (high_shift + 4)));
      }
      const uint8_t* qs = src + (has_high_bits ? 48 : 16);
      for (size_t l = 0; l < 128; l += 4) {
        std::memcpy(dst + x8_quant_offset(i, l, has_high_bits), qs + l, 4);
      }
      if (!has_high_bits) continue;
      // Byte (c, h, i, j) gathers, for quads m = 4h + k, the fifth bits of elements 64c + l and
      // 64c + 32 + l (l = 4m + j: bits 2c and 2c + 1 of plain qh[l]) at bits k and 4 + k, one
      // byte at a time (start-up copies every Q5_K matrix through here).
      const uint8_t* qh = src + 16;
      for (size_t c = 0; c < 4; ++c) {
        for (size_t h = 0; h < 2; ++h) {
          for (size_t j = 0; j < 4; ++j) {
            unsigned byte = 0;
            for (size_t k = 0; k < 4; ++k) {
              const unsigned q = qh[16 * h + 4 * k + j] >> (2 * c);
              byte |= ((q & 1u) << k) | (((q >> 1) & 1u) << (4 + k));
            }
            dst[kQ45KX8Header + 320 * c + 256 + 32 * h + 4 * i + j] = static_cast<uint8_t>(byte);
          }
        }
      }
    }
  }
}

// The x8 dot of Q4_K or Q5_K: each row's plain block rebuilt, then the plain term.
void dot_q45_k_x8_rows(const uint8_t* groups, size_t row_begin, size_t row_end,
                       const ActivationRows& x, float* y, size_t y_stride, bool has_high_bits) {
  const size_t x8_bytes = has_high_bits ? kQ5KX8Bytes : kQ4KX8Bytes;
  const size_t blocks = x.cols / kSuper;
  for (size_t t = 0; t < x.n_tokens; ++t) {
    for (size_t r = row_begin; r < row_end; ++r) {
      const uint8_t* group = groups + r / kGroupRows * blocks * x8_bytes;
      const size_t i = r % kGroupRows;
      float sum = 0.0f;
      for (size_t b = 0; b < blocks; ++b) {
        uint8_t qs[128];
        uint8_t qh[32];
        const Q45KBlock k = x8_block(group + b * x8_bytes, i, has_high_bits, qs, qh);
        sum += q45_k_term(k, activation_block(x, t, b));
      }
      y[t * y_stride + (r - row_begin)] = sum;
    }
  }
}

// ---- The Q6_K x8 layout (quant_dot.h).
constexpr size_t kQ6KX8Bytes = kGroupRows * kQ6KBlockBytes;

// Where row i's element e (e < 256) of a Q6_K x8 super-block keeps its low 4 bits (byte, shift)
// and its top 2 bits (byte, shift).
struct Q6KX8Place {
  size_t low_byte;
  int low_shift;
  size_t high_byte;
  int high_shift;
};

Q6KX8Place q6_k_x8_place(size_t i, size_t e) {
  const size_t c = e / 64, half = e % 64 / 32, m = e % 32 / 4, j = e % 4;
  return {144 + 384 * c + 32 * m + 4 * i + j, static_cast<int>(4 * half),
          400 + 384 * c + 32 * (m / 2) + 4 * i + j, static_cast<int>(4 * (m % 2) + 2 * half)};
}

// The 6-bit quant (0..63) of element e of a plain Q6_K super-block: the low 4 bits from ql, the top
// 2 from qh.
int q6_k_quant(const uint8_t* blk, int e) {
  const int h = e / 128, s = (e / 32) % 4, l = e % 32;
  const int low = (blk[64 * h + 32 * (s % 2) + l] >> (4 * (s / 2))) & 0x0f;
  const int high = (blk[128 + 32 * h + l] >> (2 * s)) & 3;
  return low | (high << 4);
}

// One plain Q6_K super-block's term against activation block a: (d * dx) * float(isum).
float q6_k_term(const uint8_t* blk, const ActivationBlock& a) {
  const uint8_t* scales = blk + 192;
  const float dw = fp16_to_fp32(load_le16(blk + 208));
  int32_t isum = 0;
  for (int g = 0; g < 16; ++g) {  // 16-element group g: elements 16 * g + i
    int32_t sub = 0;
    for (int i = 0; i < 16; ++i) {
      const int e = 16 * g + i;
      sub += (q6_k_quant(blk, e) - 32) * a.qs[e];
    }
    isum += static_cast<int8_t>(scales[g]) * sub;
  }
  return (dw * a.d) * static_cast<float>(isum);
}

float dot_q6_k_row(const uint8_t* row, const ActivationRows& x, size_t t) {
  const size_t blocks = x.cols / kSuper;
  float sum = 0.0f;
  for (size_t b = 0; b < blocks; ++b) {
    sum += q6_k_term(row + b * kQ6KBlockBytes, activation_block(x, t, b));
  }
  return sum;
}

// The 2-bit quant of element e of a Q2_K / Q3_K super-block (e = 128h + 32s + l, l < 32): bits
// 2s, 2s + 1 of qs[32h + l].
int low_2_bits(const uint8_t* qs, int e) {
  return (qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3;
}

float dot_q2_k_row(const uint8_t* row, const ActivationRows& x, size_t t) {
  const size_t blocks = x.cols / kSuper;
  float sum = 0.0f;
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = row + b * kQ2KBlockBytes;
    const uint8_t* scales = blk;  // group g: scale in the low nibble, min in the high one
    const uint8_t* qs = blk + 16;
    const float dw = fp16_to_fp32(load_le16(blk + 80));
    const float dmin = fp16_to_fp32(load_le16(blk + 82));
    const ActivationBlock a = activation_block(x, t, b);
    int32_t isum = 0;
    int32_t imin = 0;
    for (int g = 0; g < 16; ++g) {  // 16-element group g: elements 16 * g + i
      int32_t sub = 0;
      for (int i = 0; i < 16; ++i) sub += low_2_bits(qs, 16 * g + i) * a.qs[16 * g + i];
      isum += (scales[g] & 0x0f) * sub;
      imin += (scales[g] >> 4) * a.bsums[g];
    }
    sum += ((dw * a.d) * static_cast<float>(isum)) - ((dmin * a.d) * static_cast<float>(imin));
  }
  return sum;
}

// Group g's 6-bit Q3_K scale (before the -32) from the 12 packed bytes: the low nibble of
// packed[g % 8] at bit 4 * (g / 8), the top 2 bits from packed[8 + g % 4] at bit 2 * (g / 4).
int q3_k_scale(const uint8_t* packed, int g) {
  const int low = (packed[g % 8] >> (4 * (g / 8))) & 0x0f;
  const int high = (packed[8 + g % 4] >> (2 * (g / 4))) & 3;
  return low | (high << 4);
}

float dot_q3_k_row(const uint8_t* row, const ActivationRows& x, size_t t) {
  const size_t blocks = x.cols / kSuper;
  float sum = 0.0f;
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = row + b * kQ3KBlockBytes;
    const uint8_t* hmask = blk;
    const uint8_t* qs = blk + 32;
    const float dw = fp16_to_fp32(load_le16(blk + 108));
    const ActivationBlock a = activation_block(x, t, b);
    int32_t isum = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t sub = 0;
      for (int i = 0; i < 16; ++i) {
        const int e = 16 * g + i;
        const int high_set = (hmask[e % 32] >> (e / 32)) & 1;
        sub += (low_2_bits(qs, e) - (high_set ? 0 : 4)) * a.qs[e];
      }
      isum += (q3_k_scale(blk + 96, g) - 32) * sub;
    }
    sum += (dw * a.d) * static_cast<float>(isum);
  }
  return sum;
}

// y[t * y_stride + r] = row_dot(weight row r, x, t) for r < rows, t < x.n_tokens.
template <typename RowDot>
void dot_each_row(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                  float* y, size_t y_stride, RowDot row_dot) {
  for (size_t t = 0; t < x.n_tokens; ++t) {
    for (size_t r = 0; r < rows; ++r) y[t * y_stride + r] = row_dot(w + r * row_bytes, x, t);
  }
}

}  // namespace

void dot_q4_k_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride) {
  for (size_t t = 0; t < x.n_tokens; ++t) {
    for (size_t r = 0; r < rows; ++r) {
      y[t * y_stride + r] = dot_q4_q5_k_row(w + r * row_bytes, kQ4KBlockBytes, false, x, t);
    }
  }
}

void dot_q5_k_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride) {
  for (size_t t = 0; t < x.n_tokens; ++t) {
    for (size_t r = 0; r < rows; ++r) {
      y[t * y_stride + r] = dot_q4_q5_k_row(w + r * row_bytes, kQ5KBlockBytes, true, x, t);
    }
  }
}

void dot_q6_k_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride) {
  dot_each_row(w, row_bytes, rows, x, y, y_stride, dot_q6_k_row);
}

void dot_q2_k_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride) {
  dot_each_row(w, row_bytes, rows, x, y, y_stride, dot_q2_k_row);
}

void dot_q3_k_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride) {
  dot_each_row(w, row_bytes, rows, x, y, y_stride, dot_q3_k_row);
}

void repack_q4_k_x8(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups) {
  repack_q45_k_x8(w, row_bytes, rows, groups, false);
}

void repack_q5_k_x8(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups) {
  repack_q45_k_x8(w, row_bytes, rows, groups, true);
}

void repack_q6_k_x8(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups) {
  const size_t blocks = row_bytes / kQ6KBlockBytes;
  const size_t n_groups = (rows + kGroupRows - 1) / kGroupRows;
  std::memset(groups, 0, n_groups * blocks * kQ6KX8Bytes);
  for (size_t r = 0; r < rows; ++r) {
    const size_t i = r % kGroupRows;
    for (size_t b = 0; b < blocks; ++b) {
      const uint8_t* src = w + r * row_bytes + b * kQ6KBlockBytes;
      uint8_t* dst = groups + (r / kGroupRows * blocks + b) * kQ6KX8Bytes;
      std::memcpy(dst + 2 * i, src + 208, 2);
      for (size_t g = 0; g < 16; ++g) dst[16 + 8 * g + i] = src[192 + g];
      // One output byte at a time (start-up copies every Q6_K matrix through here). Element
      // 64c + 32t + l of the plain block keeps its low 4 bits in ql[64(c / 2) + 32t + l] at bit
      // 4(c % 2) and its top 2 in qh[32(c / 2) + l] at bit 2(2(c % 2) + t).
      for (size_t c = 0; c < 4; ++c) {
        const uint8_t* ql = src + 64 * (c / 2);
        const uint8_t* qh = src + 128 + 32 * (c / 2);
        const int shift = 4 * static_cast<int>(c % 2);
        const auto low = [&](size_t t, size_t l) { return (ql[32 * t + l] >> shift) & 0x0f; };
        const auto top = [&](size_t t, size_t l) {
          return (qh[l] >> (shift + 2 * static_cast<int>(t))) & 3;
        };
        uint8_t* chunk = dst + 144 + 384 * c;
        for (size_t m = 0; m < 8; ++m) {
          for (size_t j = 0; j < 4; ++j) {
            const size_t l = 4 * m + j;
            chunk[32 * m + 4 * i + j] = static_cast<uint8_t>(low(0, l) | (low(1, l) << 4));
          }
        }
        for (size_t k = 0; k < 4; ++k) {
          for (size_t j = 0; j < 4; ++j) {
            const size_t l0 = 8 * k + j, l1 = 8 * k + 4 + j;
            chunk[256 + 32 * k + 4 * i + j] = static_cast<uint8_t>(
                top(0, l0) | (top(1, l0) << 2) | (top(0, l1) << 4) | (top(1, l1) << 6));
          }
        }
      }
    }
  }
}

// Row i's plain Q6_K super-block rebuilt from a group's x8 super-block, then the plain term.
void dot_q6_k_x8_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                        const ActivationRows& x, float* y, size_t y_stride) {
  const size_t blocks = x.cols / kSuper;
  for (size_t t = 0; t < x.n_tokens; ++t) {
    for (size_t r = row_begin; r < row_end; ++r) {
      const uint8_t* group = groups + r / kGroupRows * blocks * kQ6KX8Bytes;
      const size_t i = r % kGroupRows;
      float sum = 0.0f;
      for (size_t b = 0; b < blocks; ++b) {
        const uint8_t* blk = group + b * kQ6KX8Bytes;
        uint8_t plain[kQ6KBlockBytes] = {};
        std::memcpy(plain + 208, blk + 2 * i, 2);
        for (size_t g = 0; g < 16; ++g) plain[192 + g] = blk[16 + 8 * g + i];
        for (size_t e = 0; e < kSuper; ++e) {
          const Q6KX8Place p = q6_k_x8_place(i, e);
          const int low = (blk[p.low_byte] >> p.low_shift) & 0x0f;
          const int high = (blk[p.high_byte] >> p.high_shift) & 3;
          const size_t h = e / 128, s = e / 32 % 4, l = e % 32;
          plain[64 * h + 32 * (s % 2) + l] |= static_cast<uint8_t>(low << (4 * (s / 2)));
          plain[128 + 32 * h + l] |= static_cast<uint8_t>(high << (2 * s));
        }
        sum += q6_k_term(plain, activation_block(x, t, b));
      }
      y[t * y_stride + (r - row_begin)] = sum;
    }
  }
}

void dot_q4_k_x8_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                        const ActivationRows& x, float* y, size_t y_stride) {
  dot_q45_k_x8_rows(groups, row_begin, row_end, x, y, y_stride, false);
}

void dot_q5_k_x8_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                        const ActivationRows& x, float* y, size_t y_stride) {
  dot_q45_k_x8_rows(groups, row_begin, row_end, x, y, y_stride, true);
}

}  // namespace tandem::kernels::detail
