// release_gpu_held_sources: the spans of the GPU's experts and dense parts handed to
// model::release_copied_bytes.
#include "engine/facade/gpu_held_sources.h"

#include <utility>
#include <vector>

#include "engine/model/mapped_file.h"

namespace tandem::engine {

uint64_t release_gpu_held_sources(const model::ModelWeights& weights,
                                  std::span<const std::pair<uint32_t, uint32_t>> gpu_experts,
                                  bool dense_on_gpu) {
  uint64_t released = 0;
  std::vector<std::span<const uint8_t>> spans;
  const auto release = [&](std::span<const uint8_t> bytes) {
    spans.push_back(bytes);
    released += bytes.size();
  };
  for (const auto& [layer, expert] : gpu_experts) {
    if (layer >= weights.layers.size() || !weights.layers[layer].moe) continue;
    const model::LayerWeights& lw = weights.layers[layer];
    for (const model::ExpertWeights* p : {&lw.experts_gate, &lw.experts_up, &lw.experts_down}) {
      if (expert < p->n_experts()) release(p->expert(expert).data);
    }
  }
  if (dense_on_gpu) {
    for (const model::LayerWeights& lw : weights.layers) {
      for (const model::TensorInfo* t : lw.dense_tensors()) release(t->data);
    }
    // A tied head is the embedding itself (model_weights.h).
    if (weights.lm_head != nullptr && weights.lm_head != weights.token_embedding) {
      release(weights.lm_head->data);
    }
  }
  // Consecutive GPU experts of one tensor together: the pages they share go too.
  model::release_copied_spans(std::move(spans));
  return released;
}

}  // namespace tandem::engine
