// minimax-m2 (MiniMax-M2, M2.1): GQA with a whole-projection QK norm and partial NEOX RoPE,
// sigmoid routing with a selection bias over every expert, weights always renormalised, no shared
// expert (llama.cpp's src/models/minimax-m2.cpp; transformers' modeling_minimax_m2.py).
#include <string>

#include "engine/model/archs/archs.h"

namespace tandem::model {

void read_minimax_m2_gguf(const GgufFile& file, const std::string& p, KeyReader& keys,
                          ModelSpec& s) {
  s.norm_topk_prob = true;  // llama.cpp's build_moe_ffn(..., norm_w = true, ...)
  read_sigmoid_router_gguf(file, p, keys, kGatingSigmoid, /*shared=*/false, s);
}

void read_minimax_m2_hf(FieldReader& f, ModelSpec& s) {
  s.n_experts = f.expert_count();
  s.n_experts_used = f.required_u64("num_experts_per_tok");
  s.expert_ffn_size = f.required_u64("intermediate_size");
  s.norm_topk_prob = true;
  s.routing = RoutingPolicy::kSigmoidTopK;
  s.router_selection_bias = true;
  // MiniMax-M2's config.json carries routed_scaling_factor, which transformers' modeling does not
  // apply (nor does llama.cpp's graph): it is not read.
}

}  // namespace tandem::model
