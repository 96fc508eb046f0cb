// PreparedWeights (internal to runtime/): the dense weights of a model as kernel views, with the
// small vectors (norms, biases) converted to float once.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/result.h"
#include "engine/model/model.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/weight_matrix.h"

namespace tandem::runtime {

struct PreparedLayer {
  // By WeightRole, filled from the layer_roles() table: RoleUse::kMatrix roles as kernel views
  // (data null when absent), kVector roles as float copies (empty when absent).
  std::array<kernels::WeightMatrix, model::kWeightRoleCount> matrices;
  std::array<std::vector<float>, model::kWeightRoleCount> vectors;
  // MLA (RoleUse::kHeadMatrices). k_b[j]: head j's key up-projection transposed, [kv_lora x
  // nope], mapping q_nope into the latent space; v_b[j]: [v_head x kv_lora], mapping the
  // attention output over the latent back to the head's value. Views into the checkpoint (split
  // layout) or into mla_owned (legacy attn_kv_b, split and transposed to F32 at load).
  std::vector<kernels::WeightMatrix> k_b, v_b;
  std::vector<float> mla_owned;
  bool moe = false;

  const kernels::WeightMatrix& matrix(model::WeightRole role) const {
    return matrices[static_cast<size_t>(role)];
  }
  // The float copy of a vector role (empty when the layer has none).
  const std::vector<float>& vector(model::WeightRole role) const {
    return vectors[static_cast<size_t>(role)];
  }
  bool has(model::WeightRole role) const {
    return matrix(role).data != nullptr || !vector(role).empty();
  }
};

// Views into the checkpoint (matrices) plus float copies of vectors. The ModelWeights and its
// checkpoint must outlive it. Immutable after prepare(); any thread may read it.
struct PreparedWeights {
  kernels::WeightMatrix token_embedding;
  std::vector<float> output_norm;
  kernels::WeightMatrix lm_head;
  std::vector<PreparedLayer> layers;
  // The interleaved copies of interleave_dense_matrices (the matrices above point into them).
  std::vector<std::vector<uint8_t>> interleaved;
};

// What prepare_weights is for:
//  kCompute: every matrix can be computed with.
//  kLayout:  only the types and shapes are read (a memory plan, a type check): the legacy
//            attn_kv_b layout's key heads are not converted (PreparedLayer::k_b of type F32 and
//            their shape, data null, mla_owned empty), which for DeepSeek-V3 saves making 2 GB
//            of floats only to count them. Everything else is as with kCompute.
enum class PrepareUse : uint8_t { kCompute, kLayout };

// INVALID_ARGUMENT / UNIMPLEMENTED naming the tensor when a type or size is not usable.
Result<PreparedWeights> prepare_weights(const model::ModelSpec& spec,
                                        const model::ModelWeights& weights,
                                        PrepareUse use = PrepareUse::kCompute);

// Gives each dense matrix that the active kernels compute faster in its type's interleaved layout
// on `mode`'s path (kernels::preferred_weight_layout: the types whose weight-type table row has an
// interleaved kernel for the active variant) an owned interleaved copy (WeightMatrix::interleaved):
// the same bits, read instead of the rows for any token count. Every layer matrix the role table
// marks `bulk` (the projections, MLA's q_a / q_b / kv_a, shared experts, dense FFNs) and the lm
// head; the embedding, the routers and the per-head MLA matrices keep their rows only. Returns the
// bytes copied.
size_t interleave_dense_matrices(PreparedWeights& w, kernels::MatmulActivations mode);

}  // namespace tandem::runtime
