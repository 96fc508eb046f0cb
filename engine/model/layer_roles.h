// The one table of a layer's weights: for every per-layer WeightRole, its GGUF name, which layers
// of a spec have it, the shape it must have there, and how the backends use it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "engine/model/model_spec.h"
#include "engine/model/weight_names.h"

namespace tandem::model {

// How the backends use a role's tensor. Binding, byte counts, prepare_weights, the device plans
// and the placement loop over the table and dispatch on this; no other list of roles exists.
enum class RoleUse {
  kMatrix,        // a dense matrix (rows = output features), multiplied by the kernels
  kVector,        // a norm, bias or sink vector, copied to float
  kHeadMatrices,  // MLA's per-head up-projections (attn_k_b, attn_v_b, legacy attn_kv_b), prepared
                  // per head by the attention kind's own step
  kExperts,       // a routed-expert projection (ExpertWeights): per expert [rows, cols], fused or
                  // one tensor per expert
  kExpertBias,    // all routed experts' biases of the layer in one [n_experts, n] tensor
};

// The shapes a role's tensor may have in one layer (the first is named in messages) and how they
// follow from the spec, e.g. "(n_heads*head_dim, hidden)".
struct RoleShape {
  std::vector<std::vector<uint64_t>> accepted;
  std::string_view what;
};

struct LayerRole {
  WeightRole role;
  // The GGUF name within a block ("attn_q" for blk.N.attn_q.weight; a name ending in ".bias" is
  // the whole tensor name's tail, blk.N.attn_q.bias). The pre-FFN norm's GGUF name depends on the
  // architecture (ArchitectureTraits::gguf_ffn_norm); "ffn_norm" here is the usual one. Also the
  // role's short name in messages and `inspect`.
  std::string_view gguf;
  RoleUse use;
  // The shape in a layer of `spec` (`moe`: a MoE layer); `accepted` empty when such a layer has no
  // such tensor. For kExperts the shape of one expert's matrix.
  RoleShape (*shape)(const ModelSpec& spec, bool moe);
  // A matrix that every token of a pass reads in full (projections, FFNs): backends may keep a
  // copy of it in its type's interleaved layout. False for the router and the shared expert's
  // one-row gate.
  bool bulk = false;
};

// Every per-layer role, in the order binding reports problems. The model-level roles (token
// embedding, output norm, lm head) are not in it.
std::span<const LayerRole> layer_roles();

// The table's entry of `role` (a per-layer role; a bug otherwise).
const LayerRole& layer_role(WeightRole role);

}  // namespace tandem::model
