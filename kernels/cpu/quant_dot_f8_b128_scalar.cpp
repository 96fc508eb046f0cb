// Scalar reference of the F8_E4M3_B128 x BF16 dot product (quant_dot.h; built with
// -ffp-contract=off).
#include <cstring>

#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kBlock = 128;
constexpr size_t kBlockBytes = 4 + kBlock;

}  // namespace

void dot_f8_b128_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                        float* y, size_t y_stride) {
  const size_t blocks = x.cols / kBlock;
  for (size_t t = 0; t < x.n_tokens; ++t) {
    const uint16_t* xt = x.bf16 + t * x.cols;
    for (size_t r = 0; r < rows; ++r) {
      const uint8_t* row = w + r * row_bytes;
      float sum = 0.0f;
      for (size_t b = 0; b < blocks; ++b) {
        const uint8_t* block = row + b * kBlockBytes;
        float scale;
        std::memcpy(&scale, block, 4);
        float s = 0.0f;
        for (size_t j = 0; j < kBlock; ++j) {
          s += fp8_e4m3_to_fp32(block[4 + j]) * bf16_to_fp32(xt[b * kBlock + j]);
        }
        sum += s * scale;
      }
      y[t * y_stride + r] = sum;
    }
  }
}

}  // namespace tandem::kernels::detail
