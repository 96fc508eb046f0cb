// ModelIdentity: which model a statistics file belongs to, and the checkpoint fingerprint.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_spec.h"
#include "engine/model/tensor_info.h"

namespace tandem::placement {

// The facts a statistics file records about its model; two files (or a file and a checkpoint)
// describe the same model when every field is equal. A plain value; any thread.
struct ModelIdentity {
  std::string architecture;  // Tandem's name: "qwen3moe", "qwen2moe", "mixtral", "olmoe"
  uint64_t n_layers = 0;
  uint64_t n_experts = 0;
  uint64_t n_experts_used = 0;
  uint64_t hidden_size = 0;
  std::vector<bool> moe_layers;  // size n_layers; true where the layer routes to experts
  std::string fingerprint;       // checkpoint_fingerprint(); "fnv1a64:" + 16 lower-case hex digits

  uint64_t n_moe_layers() const;
  // The model indices of the MoE layers, ascending.
  std::vector<uint32_t> moe_layer_ids() const;
};

// 64-bit FNV-1a of `bytes` (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
uint64_t fnv1a64(std::string_view bytes);

// The fingerprint of a checkpoint: FNV-1a (64-bit) over the canonical text
//   "tandem-fingerprint-v1\n" + architecture + "\n"
//   + for each tensor, sorted by name: name "\t" type name "\t" dims joined by "x" (outermost
//     first) "\t" byte size "\n"
// written as "fnv1a64:%016x". It depends on the names, types, shapes and sizes of the tensors,
// never on their values or file layout (shard split, tensor order, offsets), so it is cheap to
// compute and equal for byte-identical re-saves. Not a cryptographic hash: it detects mistakes,
// not forgeries. Pure; any thread.
std::string checkpoint_fingerprint(std::string_view architecture,
                                   std::span<const model::TensorInfo> tensors);

// The identity of a spec and its tensors (fingerprint included).
ModelIdentity model_identity(const model::ModelSpec& spec,
                             std::span<const model::TensorInfo> tensors);

// The identity of an opened checkpoint; FAILED_PRECONDITION when it is not a runnable model.
Result<ModelIdentity> model_identity(const model::Checkpoint& checkpoint);

// OK when `found` (e.g. from a file) describes the same model as `expected`; otherwise
// FAILED_PRECONDITION naming every field that differs with both values, e.g.
// "statistics are for another model: n_experts is 64 in the file, 128 in the model".
Status check_same_model(const ModelIdentity& found, const ModelIdentity& expected);

}  // namespace tandem::placement
