// prepare_weights: kernel views of the dense matrices, float copies of norms and biases.
#include "engine/runtime/prepared_weights.h"

#include "engine/experts/cpu_expert_worker.h"

namespace tandem::runtime {
namespace {

Status to_float(const model::TensorInfo* t, std::vector<float>& out) {
  return experts::float_copy_of(t, out);
}

Status to_matrix(const model::TensorInfo* t, kernels::WeightMatrix& out) {
  if (t == nullptr) return Status();
  TANDEM_ASSIGN_OR_RETURN(out, experts::weight_matrix_of(*t));
  return Status();
}

}  // namespace

Result<PreparedWeights> prepare_weights(const model::ModelSpec& spec,
                                        const model::ModelWeights& weights) {
  (void)spec;
  PreparedWeights p;
  TANDEM_RETURN_IF_ERROR(to_matrix(weights.token_embedding, p.token_embedding));
  TANDEM_RETURN_IF_ERROR(to_matrix(weights.lm_head, p.lm_head));
  TANDEM_RETURN_IF_ERROR(to_float(weights.output_norm, p.output_norm));
  p.layers.resize(weights.layers.size());
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    const model::LayerWeights& w = weights.layers[l];
    PreparedLayer& L = p.layers[l];
    TANDEM_RETURN_IF_ERROR(to_float(w.attn_norm, L.attn_norm));
    TANDEM_RETURN_IF_ERROR(to_matrix(w.q, L.q));
    TANDEM_RETURN_IF_ERROR(to_matrix(w.k, L.k));
    TANDEM_RETURN_IF_ERROR(to_matrix(w.v, L.v));
    TANDEM_RETURN_IF_ERROR(to_matrix(w.o, L.o));
    TANDEM_RETURN_IF_ERROR(to_float(w.o_bias, L.o_bias));
    TANDEM_RETURN_IF_ERROR(to_float(w.sinks, L.sinks));
    TANDEM_RETURN_IF_ERROR(to_float(w.q_bias, L.q_bias));
    TANDEM_RETURN_IF_ERROR(to_float(w.k_bias, L.k_bias));
    TANDEM_RETURN_IF_ERROR(to_float(w.v_bias, L.v_bias));
    TANDEM_RETURN_IF_ERROR(to_float(w.q_norm, L.q_norm));
    TANDEM_RETURN_IF_ERROR(to_float(w.k_norm, L.k_norm));
    TANDEM_RETURN_IF_ERROR(to_float(w.ffn_norm, L.ffn_norm));
    L.moe = w.moe;
    if (w.moe) {
      TANDEM_RETURN_IF_ERROR(to_matrix(w.router, L.router));
      TANDEM_RETURN_IF_ERROR(to_float(w.router_bias, L.router_bias));
      L.has_shared = w.shared_gate != nullptr;
      TANDEM_RETURN_IF_ERROR(to_matrix(w.shared_gate, L.shared_gate));
      TANDEM_RETURN_IF_ERROR(to_matrix(w.shared_up, L.shared_up));
      TANDEM_RETURN_IF_ERROR(to_matrix(w.shared_down, L.shared_down));
      L.has_shared_gate = w.shared_expert_gate != nullptr;
      TANDEM_RETURN_IF_ERROR(to_matrix(w.shared_expert_gate, L.shared_expert_gate));
    } else {
      TANDEM_RETURN_IF_ERROR(to_matrix(w.ffn_gate, L.ffn_gate));
      TANDEM_RETURN_IF_ERROR(to_matrix(w.ffn_up, L.ffn_up));
      TANDEM_RETURN_IF_ERROR(to_matrix(w.ffn_down, L.ffn_down));
    }
  }
  return p;
}

}  // namespace tandem::runtime
