// glm4moe (GLM-4.5 / 4.6 / 4.7, Solar Open): its names, recipe and spec readers. GQA with partial
// NEOX RoPE, q/k/v biases, per-head QK norm where present, sigmoid routing with a selection bias, a
// plain shared expert, leading dense layers and an MTP layer counted in block_count (llama.cpp's
// src/models/glm4-moe.cpp; transformers' modeling_glm4_moe.py).
#include <string>

#include "engine/model/archs/archs.h"

namespace tandem::model {

namespace {

void read_glm4moe_gguf(const GgufFile& file, const std::string& p, KeyReader& keys, ModelSpec& s) {
  s.attn_qkv_bias = file.find_tensor("blk.0.attn_q.bias") != nullptr;
  s.qk_norm =
      file.find_tensor("blk.0.attn_q_norm.weight") != nullptr ? QkNorm::kPerHead : QkNorm::kNone;
  // llama.cpp's default gating for glm4moe is sigmoid.
  read_sigmoid_router_gguf(file, p, keys, kGatingSigmoid, /*shared=*/true, s);
}

void read_glm4_moe_hf(FieldReader& f, ModelSpec& s) {
  s.attn_qkv_bias = f.optional_bool("attention_bias").value_or(false);
  s.qk_norm = f.optional_bool("use_qk_norm").value_or(false) ? QkNorm::kPerHead : QkNorm::kNone;
  read_deepseek_style_moe_hf(f, s);
}

constexpr SpecReaders kReaders{.gguf = read_glm4moe_gguf, .hf = read_glm4_moe_hf};

}  // namespace

// q/k/v biases and the per-head QK norm as the file has them (the readers), sigmoid routing with a
// selection bias, a plain shared expert, the pre-FFN norm named post_attention_norm in GGUF.
constexpr ArchitectureTraits kGlm4MoeArch{
    .architecture = Architecture::kGlm4Moe,
    .name = "glm4moe",
    .gguf_arch = "glm4moe",
    .hf_model_type = "glm4_moe",
    .hf_class = "Glm4MoeForCausalLM",
    .recipe = {.qkv_bias = true,
               .routing = RoutingPolicy::kSigmoidTopK,
               .selection_bias = true,
               .shared_expert = SharedExpertKind::kPlain,
               .default_norm_topk_prob = false},
    .gguf_ffn_norm = "post_attention_norm",
    .hf = {.shared_expert = kDeepseekSharedExpertNames},
    .spec_readers = &kReaders,
};

}  // namespace tandem::model
