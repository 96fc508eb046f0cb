// minimax-m2 (MiniMax-M2, M2.1): its names (Mixtral's), recipe and spec readers. GQA with a
// whole-projection QK norm and partial NEOX RoPE, sigmoid routing with a selection bias over every
// expert, weights always renormalised, no shared expert (llama.cpp's src/models/minimax-m2.cpp;
// transformers' modeling_minimax_m2.py).
#include <string>

#include "engine/model/archs/archs.h"

namespace tandem::model {

namespace {

void read_minimax_m2_gguf(const GgufFile& file, const std::string& p, KeyReader& keys,
                          ModelSpec& s) {
  s.norm_topk_prob = true;  // llama.cpp's build_moe_ffn(..., norm_w = true, ...)
  read_sigmoid_router_gguf(file, p, keys, kGatingSigmoid, /*shared=*/false, s);
}

void read_minimax_m2_hf(FieldReader& f, ModelSpec& s) {
  read_routed_experts_hf(f, "intermediate_size", s);
  s.norm_topk_prob = true;
  s.routing = RoutingPolicy::kSigmoidTopK;
  s.router_selection_bias = true;
  // MiniMax-M2's config.json carries routed_scaling_factor, which transformers' modeling does not
  // apply (nor does llama.cpp's graph): it is not read.
}

constexpr SpecReaders kReaders{.gguf = read_minimax_m2_gguf, .hf = read_minimax_m2_hf};

}  // namespace

// Q/K norm over the whole projection, sigmoid routing with a selection bias, always renormalised.
constexpr ArchitectureTraits kMinimaxM2Arch{
    .architecture = Architecture::kMinimaxM2,
    .name = "minimax-m2",
    .gguf_arch = "minimax-m2",
    .hf_model_type = "minimax_m2",
    .hf_class = "MiniMaxM2ForCausalLM",
    .recipe = {.qk_norm = QkNorm::kWholeProjection,
               .routing = RoutingPolicy::kSigmoidTopK,
               .selection_bias = true,
               .default_norm_topk_prob = true},
    .hf = kBlockSparseMoeHfNames,
    .spec_readers = &kReaders,
};

}  // namespace tandem::model
