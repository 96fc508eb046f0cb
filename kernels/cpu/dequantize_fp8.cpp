// Scalar reference conversion of Tandem's block-scaled FP8 layout (TensorType::kF8_E4M3_B128).
#include <bit>

#include "kernels/cpu/dequantize_rows.h"
#include "kernels/cpu/float_convert.h"

namespace tandem::kernels {

void dequantize_f8_e4m3_b128(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += 132, dst += 128) {
    const float scale = std::bit_cast<float>(load_le32(src));
    for (size_t j = 0; j < 128; ++j) dst[j] = fp8_e4m3_to_fp32(src[4 + j]) * scale;
  }
}

}  // namespace tandem::kernels
