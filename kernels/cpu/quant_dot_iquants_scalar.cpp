// Scalar reference dot products of the grid i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S) with Q8_K activations (quant_dot.h states the arithmetic); the blocks are
// decoded by iq_blocks.h.
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/iq_blocks.h"
#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kSuper = 256;

// The factor of (d * factor) * dx * float(isum): what the type's scale rule leaves over once the
// integer part holds the odd multipliers 2s + 1 (IQ1 also its deltas, in eighths).
float dot_factor(IqScaleRule rule) {
  switch (rule) {
    case IqScaleRule::kQuarter:
    case IqScaleRule::kOddDelta:
      return 0.125f;
    case IqScaleRule::kHalf:
      return 0.25f;
    case IqScaleRule::kOdd:
      return 1.0f;
  }
  return 0.0f;
}

float dot_row(const IqBlockType& type, const uint8_t* row, const ActivationRows& x, size_t t) {
  const size_t blocks = x.cols / kSuper;
  const float factor = dot_factor(type.rule);
  float sum = 0.0f;
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = row + b * type.block_bytes;
    const int8_t* xq = x.qs + t * x.cols + b * kSuper;
    int32_t isum = 0;
    for (size_t ib = 0; ib < 8; ++ib) {
      IqSubBlock sub;
      type.decode(blk, ib, sub);
      for (size_t l = 0; l < 4; ++l) {
        int32_t products = 0;
        int32_t quants = 0;
        for (size_t j = 0; j < 8; ++j) {
          products += sub.v[8 * l + j] * xq[32 * ib + 8 * l + j];
          quants += xq[32 * ib + 8 * l + j];
        }
        const int32_t group =
            type.rule == IqScaleRule::kOddDelta ? 8 * products + sub.delta[l] * quants : products;
        isum += (2 * sub.s[l] + 1) * group;
      }
    }
    const float dw = fp16_to_fp32(type.d_bits(blk));
    sum += ((dw * factor) * x.d[t * blocks + b]) * static_cast<float>(isum);
  }
  return sum;
}

void dot_rows(const IqBlockType& type, const uint8_t* w, size_t row_bytes, size_t rows,
              const ActivationRows& x, float* y, size_t y_stride) {
  for (size_t t = 0; t < x.n_tokens; ++t) {
    for (size_t r = 0; r < rows; ++r) y[t * y_stride + r] = dot_row(type, w + r * row_bytes, x, t);
  }
}

}  // namespace

void dot_iq2_xxs_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                        float* y, size_t y_stride) {
  dot_rows(kIq2XxsBlocks, w, row_bytes, rows, x, y, y_stride);
}

void dot_iq2_xs_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                       float* y, size_t y_stride) {
  dot_rows(kIq2XsBlocks, w, row_bytes, rows, x, y, y_stride);
}

void dot_iq2_s_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                      float* y, size_t y_stride) {
  dot_rows(kIq2SBlocks, w, row_bytes, rows, x, y, y_stride);
}

void dot_iq3_xxs_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                        float* y, size_t y_stride) {
  dot_rows(kIq3XxsBlocks, w, row_bytes, rows, x, y, y_stride);
}

void dot_iq3_s_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                      float* y, size_t y_stride) {
  dot_rows(kIq3SBlocks, w, row_bytes, rows, x, y, y_stride);
}

void dot_iq1_s_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                      float* y, size_t y_stride) {
  dot_rows(kIq1SBlocks, w, row_bytes, rows, x, y, y_stride);
}

void dot_iq1_m_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                      float* y, size_t y_stride) {
  dot_rows(kIq1MBlocks, w, row_bytes, rows, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
