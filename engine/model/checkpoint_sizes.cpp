// checkpoint_sizes: the byte split of a checkpoint into experts, dense parts and embeddings.
#include <algorithm>
#include <set>

#include "engine/model/checkpoint.h"

namespace tandem::model {

CheckpointSizes checkpoint_sizes(const Checkpoint& c) {
  CheckpointSizes s;
  for (const TensorInfo& t : c.tensors) s.total += t.data.size();
  if (!c.weights) return s;
  const ModelWeights& w = *c.weights;
  std::set<const TensorInfo*> counted;
  auto add = [&](const TensorInfo* t, uint64_t& bucket) {
    if (t != nullptr && counted.insert(t).second) bucket += t->data.size();
  };
  add(w.token_embedding, s.embeddings);
  add(w.lm_head, s.embeddings);
  add(w.output_norm, s.dense);
  for (const TensorInfo* t : w.unused) add(t, s.unused);
  for (const LayerWeights& l : w.layers) {
    for (const TensorInfo* t : l.dense_tensors()) add(t, s.dense);
    uint64_t one_expert = 0;
    if (l.moe) {
      const uint64_t n = l.experts_gate.n_experts();
      for (uint64_t e = 0; e < n; ++e) {
        uint64_t bytes = 0;
        for (const ExpertWeights* ew : {&l.experts_gate, &l.experts_up, &l.experts_down}) {
          if (e < ew->n_experts()) bytes += ew->expert(e).data.size();
        }
        one_expert = std::max(one_expert, bytes);
      }
      for (RoleUse use : {RoleUse::kExperts, RoleUse::kExpertBias}) {
        for (const TensorInfo* t : l.tensors_of(use)) add(t, s.experts);
      }
    }
    s.per_expert_per_layer.push_back(one_expert);
    s.per_expert += one_expert;
  }
  return s;
}

}  // namespace tandem::model
