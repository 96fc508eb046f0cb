// Test helper: a two-layer MoE "model" of random fused expert tensors of one weight type, random
// routings and inputs, for the expert-worker tests (CPU and CUDA).
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/experts/routing.h"
#include "engine/model/model.h"
#include "tests/kernels/random_weights.h"

namespace tandem::testing {

inline constexpr size_t kRandomExpertLayers = 2;
inline constexpr size_t kRandomExperts = 8;

// kRandomExpertLayers MoE layers of kRandomExperts experts, hidden x ffn, 3 used per token, the
// weights random (testing::random_weight_bytes, |value| <= ~0.2). Views into its own storage, so
// it is neither copied nor moved (return it as a prvalue).
struct RandomExperts {
  size_t hidden;
  size_t ffn;
  model::ModelSpec spec;
  std::vector<std::vector<uint8_t>> storage;
  std::vector<model::TensorInfo> tensors;  // gate, up, down per layer (fixed size: no realloc)
  model::ModelWeights weights;

  RandomExperts(TensorType type, size_t hidden_size, size_t ffn_size, uint32_t seed)
      : hidden(hidden_size), ffn(ffn_size) {
    constexpr size_t kLayers = kRandomExpertLayers;
    constexpr size_t kExperts = kRandomExperts;
    spec.n_layers = kLayers;
    spec.hidden_size = hidden;
    spec.n_experts = kExperts;
    spec.n_experts_used = 3;
    spec.expert_ffn_size = ffn;
    std::mt19937 rng(seed);
    tensors.resize(3 * kLayers);
    storage.resize(3 * kLayers);
    weights.layers.resize(kLayers);
    for (size_t l = 0; l < kLayers; ++l) {
      for (size_t p = 0; p < 3; ++p) {
        const size_t rows = p == 2 ? hidden : ffn;
        const size_t cols = p == 2 ? ffn : hidden;
        auto& bytes = storage[3 * l + p];
        bytes = random_weight_bytes(type, kExperts * rows, cols, 0.2f, rng);
        model::TensorInfo& t = tensors[3 * l + p];
        t.name = "blk." + std::to_string(l) + (p == 0 ? ".gate" : p == 1 ? ".up" : ".down");
        t.type = type;
        t.shape = {kExperts, rows, cols};
        t.n_elements = kExperts * rows * cols;
        t.data = bytes;
      }
      model::LayerWeights& lw = weights.layers[l];
      lw.moe = true;
      lw.experts_gate = model::ExpertWeights::fused(&tensors[3 * l]);
      lw.experts_up = model::ExpertWeights::fused(&tensors[3 * l + 1]);
      lw.experts_down = model::ExpertWeights::fused(&tensors[3 * l + 2]);
    }
  }
  RandomExperts(const RandomExperts&) = delete;
  RandomExperts& operator=(const RandomExperts&) = delete;
};

// Each token picks k distinct experts of n_experts at random, with weights in [0.05, 0.6).
inline experts::Routing random_routing(size_t n_tokens, size_t k, size_t n_experts,
                                       std::mt19937& rng) {
  experts::Routing r;
  r.n_tokens = n_tokens;
  r.k = k;
  std::vector<int32_t> ids(n_experts);
  for (size_t i = 0; i < n_experts; ++i) ids[i] = static_cast<int32_t>(i);
  std::uniform_real_distribution<float> w(0.05f, 0.6f);
  for (size_t t = 0; t < n_tokens; ++t) {
    std::shuffle(ids.begin(), ids.end(), rng);
    for (size_t s = 0; s < k; ++s) {
      r.experts.push_back(ids[s]);
      r.weights.push_back(w(rng));
    }
  }
  return r;
}

// n floats uniform in [-1, 1).
inline std::vector<float> random_input(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

}  // namespace tandem::testing
