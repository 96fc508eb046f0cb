// Scalar reference dot products of the 32-element weight types (Q8_0, Q4_0, Q5_0, MXFP4, IQ4_NL)
// with Q8_0 activations: the literal form of quant_dot.h's semantics (built with
// -ffp-contract=off).
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/iq4_values.h"
#include "kernels/cpu/mxfp4_values.h"
#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {

namespace {

constexpr size_t kBlock = 32;
constexpr size_t kHalf = kBlock / 2;
constexpr size_t kQ8_0Bytes = 34;
constexpr size_t kQ4_0Bytes = 18;
constexpr size_t kQ5_0Bytes = 22;
constexpr size_t kMxfp4Bytes = 17;
constexpr size_t kIq4NlBytes = 18;

// One row of `blocks` blocks against one activation row; block_dot(block, xq) is the block's exact
// integer sum and block_scale(block) the weight scale (dw or de).
template <size_t kBytes, typename BlockDot, typename BlockScale>
float dot_row(const uint8_t* row, size_t blocks, const int8_t* xq, const float* xd,
              BlockDot block_dot, BlockScale block_scale, bool activation_first) {
  float sum = 0.0f;
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* block = row + b * kBytes;
    const int32_t isum = block_dot(block, xq + b * kBlock);
    const float ws = block_scale(block);
    // Q8_0 / Q4_0: float(isum) * (dw * dx); MXFP4: float(isum) * (dx * de).
    const float scale = activation_first ? xd[b] * ws : ws * xd[b];
    sum += static_cast<float>(isum) * scale;
  }
  return sum;
}

template <size_t kBytes, typename BlockDot, typename BlockScale>
void dot_rows(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x, float* y,
              size_t y_stride, BlockDot block_dot, BlockScale block_scale, bool activation_first) {
  const size_t blocks = x.cols / kBlock;
  for (size_t t = 0; t < x.n_tokens; ++t) {
    const int8_t* xq = x.qs + t * x.cols;
    const float* xd = x.d + t * blocks;
    for (size_t r = 0; r < rows; ++r) {
      y[t * y_stride + r] = dot_row<kBytes>(w + r * row_bytes, blocks, xq, xd, block_dot,
                                            block_scale, activation_first);
    }
  }
}

// The exact integer part of a block whose 16 nibble bytes qs (laid out as Q4_0's) index the
// 16-entry value table `values` (MXFP4, IQ4_NL).
int32_t table_block_dot(const uint8_t* qs, const int* values, const int8_t* xq) {
  int32_t isum = 0;
  for (size_t j = 0; j < kHalf; ++j) {
    isum += values[qs[j] & 0x0f] * xq[j];
    isum += values[qs[j] >> 4] * xq[j + kHalf];
  }
  return isum;
}

float fp16_scale(const uint8_t* block) {
  return fp16_to_fp32(load_le16(block));
}

}  // namespace

void dot_q8_0_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride) {
  auto block_dot = [](const uint8_t* block, const int8_t* xq) {
    const int8_t* qs = reinterpret_cast<const int8_t*>(block + 2);
    int32_t isum = 0;
    for (size_t j = 0; j < kBlock; ++j) isum += qs[j] * xq[j];
    return isum;
  };
  dot_rows<kQ8_0Bytes>(w, row_bytes, rows, x, y, y_stride, block_dot, fp16_scale, false);
}

void dot_q4_0_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride) {
  auto block_dot = [](const uint8_t* block, const int8_t* xq) {
    const uint8_t* qs = block + 2;
    int32_t isum = 0;
    for (size_t j = 0; j < kHalf; ++j) {
      isum += ((qs[j] & 0x0f) - 8) * xq[j];
      isum += ((qs[j] >> 4) - 8) * xq[j + kHalf];
    }
    return isum;
  };
  dot_rows<kQ4_0Bytes>(w, row_bytes, rows, x, y, y_stride, block_dot, fp16_scale, false);
}

void dot_q5_0_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride) {
  auto block_dot = [](const uint8_t* block, const int8_t* xq) {
    const uint32_t qh = static_cast<uint32_t>(block[2]) | static_cast<uint32_t>(block[3]) << 8 |
                        static_cast<uint32_t>(block[4]) << 16 |
                        static_cast<uint32_t>(block[5]) << 24;
    const uint8_t* qs = block + 6;
    int32_t isum = 0;
    for (size_t j = 0; j < kHalf; ++j) {
      const int32_t lo = static_cast<int32_t>((qs[j] & 0x0f) | ((qh >> j) & 1) << 4) - 16;
      const int32_t hi = static_cast<int32_t>((qs[j] >> 4) | ((qh >> (j + kHalf)) & 1) << 4) - 16;
      isum += lo * xq[j];
      isum += hi * xq[j + kHalf];
    }
    return isum;
  };
  dot_rows<kQ5_0Bytes>(w, row_bytes, rows, x, y, y_stride, block_dot, fp16_scale, false);
}

void dot_mxfp4_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                      float* y, size_t y_stride) {
  auto block_dot = [](const uint8_t* block, const int8_t* xq) {
    return table_block_dot(block + 1, kMxfp4Values, xq);
  };
  auto block_scale = [](const uint8_t* block) { return e8m0_half(block[0]); };
  dot_rows<kMxfp4Bytes>(w, row_bytes, rows, x, y, y_stride, block_dot, block_scale, true);
}

void dot_iq4_nl_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                       float* y, size_t y_stride) {
  auto block_dot = [](const uint8_t* block, const int8_t* xq) {
    return table_block_dot(block + 2, kIq4Values, xq);
  };
  dot_rows<kIq4NlBytes>(w, row_bytes, rows, x, y, y_stride, block_dot, fp16_scale, false);
}

}  // namespace tandem::kernels::detail
