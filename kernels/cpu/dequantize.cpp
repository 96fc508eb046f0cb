// dequantize(): size checks and dispatch through the weight-type table; the plain float types.
#include "kernels/cpu/dequantize.h"

#include <bit>
#include <cstring>

#include "kernels/cpu/dequantize_rows.h"
#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/weight_type_table.h"

namespace tandem::kernels {

void dequantize_f32(const uint8_t* src, float* dst, size_t blocks) {
  if (blocks != 0) std::memcpy(dst, src, blocks * sizeof(float));
}

void dequantize_f16(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t i = 0; i < blocks; ++i) dst[i] = fp16_to_fp32(load_le16(src + 2 * i));
}

void dequantize_bf16(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t i = 0; i < blocks; ++i) dst[i] = bf16_to_fp32(load_le16(src + 2 * i));
}

void dequantize_f64(const uint8_t* src, float* dst, size_t blocks) {
  for (size_t i = 0; i < blocks; ++i) {
    const uint64_t bits = static_cast<uint64_t>(load_le32(src + 8 * i)) |
                          (static_cast<uint64_t>(load_le32(src + 8 * i + 4)) << 32);
    dst[i] = static_cast<float>(std::bit_cast<double>(bits));
  }
}

bool dequantize_supported(TensorType type) {
  return weight_type_kernels(type) != nullptr;
}

std::string dequantize_supported_names() {
  return weight_type_names();
}

Status dequantize(TensorType type, std::span<const uint8_t> src, std::span<float> dst) {
  const WeightTypeKernels* row = weight_type_kernels(type);
  if (row == nullptr) {
    return unimplemented_error("dequantize: type " + std::string(tensor_type_name(type)) +
                               " is not supported; supported: " + dequantize_supported_names());
  }
  const Result<uint64_t> want = tensor_type_bytes(type, dst.size());
  if (!want.ok()) return want.status().with_prefix("dequantize");
  if (*want != src.size()) {
    return invalid_argument_error(
        "dequantize: " + std::to_string(dst.size()) + " " + std::string(tensor_type_name(type)) +
        " elements need " + std::to_string(*want) + " bytes, got " + std::to_string(src.size()));
  }
  const auto traits = tensor_type_traits(type);
  row->to_float(src.data(), dst.data(), dst.size() / traits->block_elements);
  return Status::ok_status();
}

}  // namespace tandem::kernels
