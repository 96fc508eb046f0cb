// PreparedWeights (internal to runtime/): the dense weights of a model as kernel views, with the
// small vectors (norms, biases) converted to float once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/result.h"
#include "engine/model/model.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/weight_matrix.h"

namespace tandem::runtime {

struct PreparedLayer {
  std::vector<float> attn_norm;
  kernels::WeightMatrix q, k, v, o;
  std::vector<float> q_bias, k_bias, v_bias, o_bias;  // empty when absent
  std::vector<float> sinks;                           // [n_heads] or empty
  std::vector<float> q_norm, k_norm;                  // empty when absent
  // MLA (q above when q_lora_rank is 0). k_b[j]: head j's key up-projection transposed,
  // [kv_lora x nope], mapping q_nope into the latent space; v_b[j]: [v_head x kv_lora], mapping
  // the attention output over the latent back to the head's value. Views into the checkpoint
  // (split layout) or into mla_owned (legacy attn_kv_b, split and transposed to F32 at load).
  kernels::WeightMatrix q_a, q_b, kv_a;
  std::vector<float> q_a_norm, kv_a_norm;
  std::vector<kernels::WeightMatrix> k_b, v_b;
  std::vector<float> mla_owned;
  std::vector<float> ffn_norm;
  bool moe = false;
  kernels::WeightMatrix router;       // [n_experts x hidden]
  std::vector<float> router_bias;     // [n_experts] or empty
  std::vector<float> selection_bias;  // [n_experts] or empty
  bool has_shared = false;
  kernels::WeightMatrix shared_gate, shared_up, shared_down;
  bool has_shared_gate = false;
  kernels::WeightMatrix shared_expert_gate;          // [1 x hidden]
  kernels::WeightMatrix ffn_gate, ffn_up, ffn_down;  // dense layers
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

// INVALID_ARGUMENT / UNIMPLEMENTED naming the tensor when a type or size is not usable.
Result<PreparedWeights> prepare_weights(const model::ModelSpec& spec,
                                        const model::ModelWeights& weights);

// Gives each dense matrix that the active kernels compute faster in its type's interleaved layout
// on `mode`'s path (kernels::interleaved_layout_preferred: Q4_K with AVX-512 VNNI today) an owned
// interleaved copy (WeightMatrix::interleaved): the same bits, faster with many tokens (prefill,
// batched decode), while a lone token still reads the rows. The projections, MLA's q_a / q_b /
// kv_a, shared experts, dense FFNs and the lm head; the embedding and the per-head MLA matrices
// keep their rows only. Returns the bytes copied.
size_t interleave_dense_matrices(PreparedWeights& w, kernels::MatmulActivations mode);

}  // namespace tandem::runtime
