// TensorInfo: one tensor of a checkpoint as both readers (GGUF, safetensors) report it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/tensor_type.h"

namespace tandem::model {

// A validated tensor: its bytes lie inside its file's mapping and match type x shape.
// Shape is outermost dimension first (PyTorch/safetensors order): a linear layer's weight is
// {out_features, in_features}. GGUF stores ne[] innermost first; its reader reverses it here.
// `data` is a view into a MappedFile owned by the reader's result; it is valid as long as that
// object lives. Nothing is copied -- except for a derived tensor (derived_from non-empty): one the
// checkpoint opener converted from file tensors whose layout the kernels cannot use (GPT-OSS's HF
// experts, gpt_oss_hf_experts.h; FP8 block weights, fp8_block_weights.h); its `data` then points
// into a buffer the Checkpoint owns, `file` is the file of its first source and file_offset is 0.
struct TensorInfo {
  std::string name;  // as written in the file
  TensorType type = TensorType::kF32;
  std::vector<uint64_t> shape;  // outermost first
  uint64_t n_elements = 0;
  std::span<const uint8_t> data;
  std::string file;          // the file that holds it (a shard's path for sharded models)
  uint64_t file_offset = 0;  // absolute offset of data in that file
  // Empty for a file tensor; for a derived one, the file tensors it was made from, comma-separated.
  std::string derived_from;
};

// "[2048, 768]": a shape as the messages about tensors write it.
inline std::string shape_string(std::span<const uint64_t> shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

}  // namespace tandem::model
