// ModelWeights: the checkpoint's tensors bound to their logical roles, checked against the spec.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/model/layer_roles.h"
#include "engine/model/model_spec.h"
#include "engine/model/tensor_info.h"
#include "engine/model/weight_names.h"

namespace tandem::model {

// One expert's matrix, 2-D, outermost first ({rows = out_features, cols = in_features}): either a
// whole per-expert tensor or one slice of a fused [n_experts, rows, cols] tensor. A view: `data`
// points into the checkpoint's mapping; nothing is copied.
struct MatrixView {
  const TensorInfo* source = nullptr;  // the checkpoint tensor it comes from
  TensorType type = TensorType::kF32;
  uint64_t rows = 0;
  uint64_t cols = 0;
  std::span<const uint8_t> data;
  uint64_t file_offset = 0;  // absolute offset of `data` in source->file
};

// One projection (gate, up or down) of all experts of one layer, in either layout.
class ExpertWeights {
 public:
  ExpertWeights() = default;
  static ExpertWeights fused(const TensorInfo* tensor);
  static ExpertWeights per_expert(std::vector<const TensorInfo*> tensors);

  bool empty() const { return fused_ == nullptr && per_expert_.empty(); }
  bool is_fused() const { return fused_ != nullptr; }
  uint64_t n_experts() const;
  // Expert e's matrix (e < n_experts(); a bug otherwise). For a fused tensor this is the e-th
  // [rows, cols] slab, which starts on a quantization-block boundary because bind_weights checked
  // that cols is a whole number of blocks.
  MatrixView expert(uint64_t e) const;
  uint64_t bytes() const;  // all experts
  // The checkpoint tensors behind it (one when fused).
  std::vector<const TensorInfo*> tensors() const;

 private:
  const TensorInfo* fused_ = nullptr;
  std::vector<const TensorInfo*> per_expert_;
};

// A layer's weights, by role (layer_roles.h). Null pointers for tensors the architecture / layer
// kind does not have.
struct LayerWeights {
  // The tensor of every role of layer_roles() but the routed experts' matrices, indexed by
  // WeightRole (the model-level roles' slots stay null).
  std::array<const TensorInfo*, kWeightRoleCount> tensors{};
  bool moe = false;
  // MoE layers: the routed experts' projections, per expert [expert_ffn, hidden] for gate and up,
  // [hidden, expert_ffn] for down.
  ExpertWeights experts_gate;
  ExpertWeights experts_up;
  ExpertWeights experts_down;

  const TensorInfo* operator[](WeightRole role) const { return tensors[static_cast<size_t>(role)]; }
  // The projection of kExpertGate / kExpertUp / kExpertDown (a bug for other roles).
  const ExpertWeights& experts(WeightRole role) const;
  ExpertWeights& experts(WeightRole role);

  // The present tensors of the roles with `use` (RoleUse::kExperts: every expert tensor), in
  // layer_roles() order.
  std::vector<const TensorInfo*> tensors_of(RoleUse use) const;
  // Every present tensor but the routed experts' matrices and biases: the dense parts that byte
  // counts and placement walk.
  std::vector<const TensorInfo*> dense_tensors() const;
};

// Every weight of a model. Pointers point into the TensorInfo list given to bind_weights, which
// must outlive this object and stay unchanged (moving the vector that holds it is fine).
// Immutable after binding; any thread may read it.
struct ModelWeights {
  const TensorInfo* token_embedding = nullptr;  // [vocab, hidden]
  const TensorInfo* output_norm = nullptr;
  const TensorInfo* lm_head = nullptr;  // == token_embedding when tied
  bool tied_embeddings = false;
  std::vector<LayerWeights> layers;
  // Tensors no role claims (allowed; `inspect` lists them).
  std::vector<const TensorInfo*> unused;
};

// Types Tandem accepts for matrices (the rows of kernels/cpu/weight_type_table.h) and for norms,
// biases and routers (F32, F16, BF16).
bool is_supported_matrix_type(TensorType type);
bool is_supported_vector_type(TensorType type);

// Binds `tensors` to roles following `naming` and checks them against `spec`: every tensor the
// architecture needs is present exactly once, with the shape the spec implies and a supported
// type; expert tensors are complete (all n_experts of each layer, one layout per projection);
// the embedding has vocab_size rows and the lm head too. On failure INVALID_ARGUMENT listing
// EVERY problem, one per line. Pure; any thread.
Result<ModelWeights> bind_weights(const ModelSpec& spec, std::span<const TensorInfo> tensors,
                                  TensorNaming naming);

}  // namespace tandem::model
