// dequantize(): size checks and dispatch to the per-type routines; the plain float types.
#include "kernels/cpu/dequantize.h"

#include <array>
#include <bit>
#include <cstring>

#include "kernels/cpu/dequantize_rows.h"
#include "kernels/cpu/float_convert.h"

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

namespace {

using RowFn = void (*)(const uint8_t*, float*, size_t);

struct Entry {
  TensorType type;
  RowFn fn;
};

constexpr std::array kEntries = {
    Entry{TensorType::kF32, dequantize_f32},   Entry{TensorType::kF16, dequantize_f16},
    Entry{TensorType::kBF16, dequantize_bf16}, Entry{TensorType::kF64, dequantize_f64},
    Entry{TensorType::kQ4_0, dequantize_q4_0}, Entry{TensorType::kQ4_1, dequantize_q4_1},
    Entry{TensorType::kQ5_0, dequantize_q5_0}, Entry{TensorType::kQ5_1, dequantize_q5_1},
    Entry{TensorType::kQ8_0, dequantize_q8_0}, Entry{TensorType::kQ2_K, dequantize_q2_k},
    Entry{TensorType::kQ3_K, dequantize_q3_k}, Entry{TensorType::kQ4_K, dequantize_q4_k},
    Entry{TensorType::kQ5_K, dequantize_q5_k}, Entry{TensorType::kQ6_K, dequantize_q6_k},
};

RowFn find(TensorType type) {
  for (const Entry& e : kEntries) {
    if (e.type == type) return e.fn;
  }
  return nullptr;
}

}  // namespace

bool dequantize_supported(TensorType type) {
  return find(type) != nullptr;
}

std::string dequantize_supported_names() {
  std::string names;
  for (const Entry& e : kEntries) {
    if (!names.empty()) names += ", ";
    names += tensor_type_name(e.type);
  }
  return names;
}

Status dequantize(TensorType type, std::span<const uint8_t> src, std::span<float> dst) {
  const RowFn fn = find(type);
  if (fn == nullptr) {
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
  fn(src.data(), dst.data(), dst.size() / traits->block_elements);
  return Status::ok_status();
}

}  // namespace tandem::kernels
