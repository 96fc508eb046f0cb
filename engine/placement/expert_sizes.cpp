// expert_sizes, gpu_reserved_bytes: byte facts the budget policy needs, from a checkpoint.
#include "engine/placement/expert_sizes.h"

#include "engine/experts/expert_device_bytes.h"

namespace tandem::placement {

Result<ExpertSizes> expert_sizes(const model::Checkpoint& c) {
  if (!c.spec || !c.weights) {
    return failed_precondition_error(c.path + ": not a runnable model: " + c.not_runnable_reason);
  }
  ExpertSizes s;
  s.n_experts = c.spec->n_experts;
  const std::vector<model::LayerWeights>& layers = c.weights->layers;
  for (size_t i = 0; i < layers.size(); ++i) {
    const model::LayerWeights& l = layers[i];
    if (!l.moe) continue;
    s.layers.push_back(static_cast<uint32_t>(i));
    // An expert's rows of the layer's expert-bias tensors, as the floats the CUDA worker holds.
    uint64_t bias_bytes = 0;
    uint64_t bias_device_bytes = 0;
    for (const model::TensorInfo* t : l.tensors_of(model::RoleUse::kExpertBias)) {
      if (s.n_experts == 0) continue;
      const uint64_t part = t->n_elements / s.n_experts * sizeof(float);
      bias_bytes += part;
      bias_device_bytes += experts::expert_device_part_bytes(part);
    }
    for (uint64_t e = 0; e < s.n_experts; ++e) {
      uint64_t bytes = bias_bytes;
      uint64_t device = bias_device_bytes;
      for (const model::ExpertWeights* w : {&l.experts_gate, &l.experts_up, &l.experts_down}) {
        if (e >= w->n_experts()) continue;
        bytes += w->expert(e).data.size();
        device += experts::expert_device_part_bytes(w->expert(e).data.size());
      }
      s.bytes.push_back(bytes);
      s.device_bytes.push_back(device);
    }
  }
  return s;
}

uint64_t gpu_reserved_bytes(const model::Checkpoint& c, uint64_t kv_cache_bytes,
                            uint64_t scratch_bytes) {
  const model::CheckpointSizes sizes = model::checkpoint_sizes(c);
  uint64_t total = 0;
  for (uint64_t b : {sizes.dense, sizes.embeddings, kv_cache_bytes, scratch_bytes}) {
    total = b > UINT64_MAX - total ? UINT64_MAX : total + b;
  }
  return total;
}

}  // namespace tandem::placement
