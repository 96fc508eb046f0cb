// TensorType: every element type a checkpoint can hold (ggml's types and safetensors' dtypes),
// with the block layout needed to size and validate a tensor.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "base/result.h"

namespace tandem {

// Values below 1000 equal ggml's type ids as written in GGUF tensor infos. Values from 1000 on
// exist only in safetensors. Values from 2000 on are Tandem's own layouts, which no file holds:
// the loader builds them from a checkpoint's tensors. Removed ggml ids (4, 5, 31-33, 36-38) are
// not listed and are rejected as unknown.
enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
  // safetensors-only dtypes.
  kU8 = 1000,
  kU16 = 1001,
  kU32 = 1002,
  kU64 = 1003,
  kBool = 1004,
  kF8_E4M3 = 1005,
  kF8_E5M2 = 1006,
  // Tandem's layouts.
  // FP8 E4M3 ("e4m3fn": bias 7, no infinities) in blocks of 128 elements along a row, each block
  // a little-endian float32 scale followed by the 128 codes (132 bytes); element = code's value *
  // scale. Built at load from a block-quantized FP8 checkpoint (a F8_E4M3 weight and its
  // weight_scale_inv, as DeepSeek-V3, Kimi-K2, MiniMax-M2 and Qwen3-FP8 publish them); the NaN
  // codes 0x7F and 0xFF never occur (the conversion refuses them).
  kF8_E4M3_B128 = 2000,
};

struct TensorTypeTraits {
  TensorType type;
  std::string_view name;    // ggml's name ("q4_K", "bf16") or the safetensors dtype ("F8_E4M3")
  uint32_t block_elements;  // elements per block (1 for plain types)
  uint32_t block_bytes;     // bytes per block
};

// Traits of a known type; nullopt for an id that no format defines.
std::optional<TensorTypeTraits> tensor_type_traits(TensorType type);

// The type for a GGUF tensor-info type id; INVALID_ARGUMENT naming the id when it is unknown.
Result<TensorType> tensor_type_from_ggml_id(uint32_t id);

// The type for a safetensors dtype string ("F32", "BF16", "F8_E4M3", ...); INVALID_ARGUMENT
// naming the string when it is unknown.
Result<TensorType> tensor_type_from_safetensors_dtype(std::string_view dtype);

// Display name ("q4_K", "BF16"); "unknown" for a value outside the table.
std::string_view tensor_type_name(TensorType type);

// Bytes that `elements` elements of `type` occupy. INVALID_ARGUMENT when elements is not a whole
// number of blocks; OUT_OF_RANGE when the size overflows 64 bits.
Result<uint64_t> tensor_type_bytes(TensorType type, uint64_t elements);

}  // namespace tandem
