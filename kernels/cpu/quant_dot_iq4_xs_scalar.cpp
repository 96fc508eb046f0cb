// Scalar reference dot product of IQ4_XS weights with Q8_K activations: the literal form of
// quant_dot.h's semantics (built with -ffp-contract=off). Block layout: dequantize_kquants.cpp.
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/iq4_values.h"
#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {

namespace {

constexpr size_t kSuper = 256;

// The exact integer part of one super-block against 256 activation quants: sum over the eight
// 32-element sub-blocks of (ls_j - 32) * (sum of kIq4Values[q] * xq). |isum| <= 256 * 127 * 128 *
// 32 < 2^31.
int32_t iq4_xs_isum(const uint8_t* block, const int8_t* xq) {
  int32_t isum = 0;
  for (int j = 0; j < 8; ++j) {
    const uint8_t* qs = block + 8 + 16 * j;
    const int8_t* x = xq + 32 * j;
    int32_t sub = 0;
    for (int l = 0; l < 16; ++l) {
      sub += kIq4Values[qs[l] & 0x0f] * x[l];
      sub += kIq4Values[qs[l] >> 4] * x[l + 16];
    }
    isum += iq4_xs_scale(block, j) * sub;
  }
  return isum;
}

}  // namespace

void dot_iq4_xs_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                       float* y, size_t y_stride) {
  const size_t blocks = x.cols / kSuper;
  for (size_t t = 0; t < x.n_tokens; ++t) {
    const int8_t* xq = x.qs + t * x.cols;
    const float* xd = x.d + t * blocks;
    for (size_t r = 0; r < rows; ++r) {
      const uint8_t* row = w + r * row_bytes;
      float sum = 0.0f;
      for (size_t b = 0; b < blocks; ++b) {
        const uint8_t* block = row + b * kIq4XsBytes;
        const float dw = fp16_to_fp32(load_le16(block));
        sum += (dw * xd[b]) * static_cast<float>(iq4_xs_isum(block, xq + b * kSuper));
      }
      y[t * y_stride + r] = sum;
    }
  }
}

}  // namespace tandem::kernels::detail
