// The table of tensor types and their block layouts (from the GGUF and safetensors formats).
#include "kernels/tensor_type.h"

#include <array>
#include <string>

namespace tandem {

namespace {

constexpr uint32_t kQK = 32;    // elements per block of the legacy quant types
constexpr uint32_t kQKK = 256;  // elements per super-block of the k-quants and i-quants

constexpr std::array<TensorTypeTraits, 42> kTypes = {{
    {TensorType::kF32, "f32", 1, 4},
    {TensorType::kF16, "f16", 1, 2},
    {TensorType::kQ4_0, "q4_0", kQK, 2 + kQK / 2},
    {TensorType::kQ4_1, "q4_1", kQK, 2 + 2 + kQK / 2},
    {TensorType::kQ5_0, "q5_0", kQK, 2 + 4 + kQK / 2},
    {TensorType::kQ5_1, "q5_1", kQK, 2 + 2 + 4 + kQK / 2},
    {TensorType::kQ8_0, "q8_0", kQK, 2 + kQK},
    // ggml's block_q8_1 holds two halves (36 bytes); gguf-py lists 40, from an older layout. Q8_1
    // is an activation type that files do not store.
    {TensorType::kQ8_1, "q8_1", kQK, 2 + 2 + kQK},
    {TensorType::kQ2_K, "q2_K", kQKK, kQKK / 16 + kQKK / 4 + 2 + 2},
    {TensorType::kQ3_K, "q3_K", kQKK, kQKK / 8 + kQKK / 4 + 12 + 2},
    {TensorType::kQ4_K, "q4_K", kQKK, 2 + 2 + 12 + kQKK / 2},
    {TensorType::kQ5_K, "q5_K", kQKK, 2 + 2 + 12 + kQKK / 8 + kQKK / 2},
    {TensorType::kQ6_K, "q6_K", kQKK, kQKK / 2 + kQKK / 4 + kQKK / 16 + 2},
    {TensorType::kQ8_K, "q8_K", kQKK, 4 + kQKK + kQKK / 16 * 2},
    {TensorType::kIQ2_XXS, "iq2_xxs", kQKK, 2 + kQKK / 8 * 2},
    {TensorType::kIQ2_XS, "iq2_xs", kQKK, 2 + kQKK / 8 * 2 + kQKK / 32},
    {TensorType::kIQ3_XXS, "iq3_xxs", kQKK, 2 + 3 * kQKK / 8},
    {TensorType::kIQ1_S, "iq1_s", kQKK, 2 + kQKK / 8 + kQKK / 32 * 2},
    {TensorType::kIQ4_NL, "iq4_nl", kQK, 2 + kQK / 2},
    {TensorType::kIQ3_S, "iq3_s", kQKK, 2 + kQKK / 4 + kQKK / 32 + kQKK / 8 + kQKK / 64},
    {TensorType::kIQ2_S, "iq2_s", kQKK, 2 + kQKK / 4 + kQKK / 32 + kQKK / 32},
    {TensorType::kIQ4_XS, "iq4_xs", kQKK, 2 + 2 + kQKK / 64 + kQKK / 2},
    {TensorType::kI8, "i8", 1, 1},
    {TensorType::kI16, "i16", 1, 2},
    {TensorType::kI32, "i32", 1, 4},
    {TensorType::kI64, "i64", 1, 8},
    {TensorType::kF64, "f64", 1, 8},
    {TensorType::kIQ1_M, "iq1_m", kQKK, kQKK / 8 + kQKK / 16 + kQKK / 32},
    {TensorType::kBF16, "bf16", 1, 2},
    {TensorType::kTQ1_0, "tq1_0", kQKK, 2 + (kQKK - 4 * kQKK / 64) / 5 + kQKK / 64},
    {TensorType::kTQ2_0, "tq2_0", kQKK, 2 + kQKK / 4},
    {TensorType::kMXFP4, "mxfp4", kQK, 1 + kQK / 2},
    {TensorType::kNVFP4, "nvfp4", 64, 4 + 64 / 2},
    {TensorType::kQ1_0, "q1_0", 128, 2 + 128 / 8},
    {TensorType::kU8, "U8", 1, 1},
    {TensorType::kU16, "U16", 1, 2},
    {TensorType::kU32, "U32", 1, 4},
    {TensorType::kU64, "U64", 1, 8},
    {TensorType::kBool, "BOOL", 1, 1},
    {TensorType::kF8_E4M3, "F8_E4M3", 1, 1},
    {TensorType::kF8_E5M2, "F8_E5M2", 1, 1},
    {TensorType::kF8_E4M3_B128, "f8_e4m3_b128", 128, 4 + 128},
}};

const TensorTypeTraits* find(TensorType type) {
  for (const TensorTypeTraits& t : kTypes) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

struct SafetensorsDtype {
  std::string_view name;
  TensorType type;
};

constexpr std::array<SafetensorsDtype, 15> kSafetensorsDtypes = {{
    {"F64", TensorType::kF64},
    {"F32", TensorType::kF32},
    {"F16", TensorType::kF16},
    {"BF16", TensorType::kBF16},
    {"I64", TensorType::kI64},
    {"I32", TensorType::kI32},
    {"I16", TensorType::kI16},
    {"I8", TensorType::kI8},
    {"U64", TensorType::kU64},
    {"U32", TensorType::kU32},
    {"U16", TensorType::kU16},
    {"U8", TensorType::kU8},
    {"BOOL", TensorType::kBool},
    {"F8_E4M3", TensorType::kF8_E4M3},
    {"F8_E5M2", TensorType::kF8_E5M2},
}};

}  // namespace

std::optional<TensorTypeTraits> tensor_type_traits(TensorType type) {
  const TensorTypeTraits* t = find(type);
  if (t == nullptr) return std::nullopt;
  return *t;
}

Result<TensorType> tensor_type_from_ggml_id(uint32_t id) {
  if (id < 1000) {
    const TensorType type = static_cast<TensorType>(id);
    if (find(type) != nullptr) return type;
  }
  return invalid_argument_error("unknown ggml tensor type id " + std::to_string(id));
}

Result<TensorType> tensor_type_from_safetensors_dtype(std::string_view dtype) {
  for (const SafetensorsDtype& d : kSafetensorsDtypes) {
    if (d.name == dtype) return d.type;
  }
  return invalid_argument_error("unknown safetensors dtype '" + std::string(dtype) + "'");
}

std::string_view tensor_type_name(TensorType type) {
  const TensorTypeTraits* t = find(type);
  return t != nullptr ? t->name : std::string_view("unknown");
}

Result<uint64_t> tensor_type_bytes(TensorType type, uint64_t elements) {
  const TensorTypeTraits* t = find(type);
  if (t == nullptr) {
    return invalid_argument_error("unknown tensor type " +
                                  std::to_string(static_cast<uint32_t>(type)));
  }
  if (elements % t->block_elements != 0) {
    return invalid_argument_error(std::to_string(elements) + " elements of type " +
                                  std::string(t->name) + " are not a whole number of " +
                                  std::to_string(t->block_elements) + "-element blocks");
  }
  const uint64_t blocks = elements / t->block_elements;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(blocks, uint64_t{t->block_bytes}, &bytes)) {
    return out_of_range_error("size of " + std::to_string(elements) + " elements of type " +
                              std::string(t->name) + " overflows 64 bits");
  }
  return bytes;
}

}  // namespace tandem
