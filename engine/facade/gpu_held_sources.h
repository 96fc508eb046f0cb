// release_gpu_held_sources: once the GPU holds its copies of weights, the checkpoint pages that
// only the GPU's upload read leave the process's resident memory.
#pragma once

#include <cstdint>
#include <span>
#include <utility>

#include "engine/model/model_weights.h"

namespace tandem::engine {

// After the GPU expert worker and the dense executor uploaded their weights and the start-up
// self-check passed: model::release_copied_bytes on the matrices of the (layer, expert) pairs in
// gpu_experts (the CPU never computes them: its worker routes them to the GPU, and its own copies
// of repacked experts were released when made), and with dense_on_gpu on every layer's dense
// tensors and a head that is not the token embedding (the CPU computes none of them while
// serving; token lookups still read the embedding). A later read of such bytes maps them again
// with the same contents, so this changes memory figures only. Returns the bytes of the spans
// given to release_copied_bytes (pages count only where whole and mapped from a file).
uint64_t release_gpu_held_sources(const model::ModelWeights& weights,
                                  std::span<const std::pair<uint32_t, uint32_t>> gpu_experts,
                                  bool dense_on_gpu);

}  // namespace tandem::engine
