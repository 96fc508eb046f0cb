// Expert byte sizes and the GPU's fixed reservation, read from an opened checkpoint.
#pragma once

#include <cstdint>

#include "base/result.h"
#include "engine/model/checkpoint.h"
#include "engine/placement/expert_table.h"

namespace tandem::placement {

// Scratch (activations, workspaces) the GPU keeps besides weights and KV cache when nothing
// better is known: 512 MiB.
inline constexpr uint64_t kDefaultGpuScratchBytes = uint64_t{512} << 20;

// Each expert's gate + up + down bytes as stored (the tensors' actual types), plus, in a model
// with expert biases (GPT-OSS), its gate, up and down bias rows as float (4 bytes a value, as the
// CUDA expert worker holds them), per MoE layer; and the same parts as the CUDA expert worker
// allocates them (device_bytes: each rounded up, experts::expert_device_part_bytes).
// FAILED_PRECONDITION when the checkpoint is not a runnable model (no bound weights).
Result<ExpertSizes> expert_sizes(const model::Checkpoint& checkpoint);

// What the GPU holds whatever the placement: every non-expert weight (dense parts and
// embeddings, checkpoint_sizes) + kv_cache_bytes + scratch_bytes (saturating).
uint64_t gpu_reserved_bytes(const model::Checkpoint& checkpoint, uint64_t kv_cache_bytes,
                            uint64_t scratch_bytes);

}  // namespace tandem::placement
