// Scalar reference of the BF16 x BF16 dot product (quant_dot.h).
#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {

void dot_bf16_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride) {
  for (size_t t = 0; t < x.n_tokens; ++t) {
    const uint16_t* xt = x.bf16 + t * x.cols;
    for (size_t r = 0; r < rows; ++r) {
      const uint8_t* row = w + r * row_bytes;
      float sum = 0.0f;
      for (size_t i = 0; i < x.cols; ++i) {
        sum += bf16_to_fp32(load_le16(row + 2 * i)) * bf16_to_fp32(xt[i]);
      }
      y[t * y_stride + r] = sum;
    }
  }
}

}  // namespace tandem::kernels::detail
