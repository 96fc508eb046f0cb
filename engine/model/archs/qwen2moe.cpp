// qwen2moe (Qwen1.5-MoE, Qwen2-MoE): GQA with q/k/v biases, softmax then top-k routing, a shared
// expert scaled by a sigmoid gate; its names, recipe and spec readers (llama.cpp's
// src/models/qwen2moe.cpp; transformers' modeling_qwen2_moe.py).
#include <array>
#include <string>

#include "engine/model/archs/archs.h"

namespace tandem::model {

namespace {

constexpr std::array kSharedExpertNames = {
    HfSuffix{"mlp.shared_expert.gate_proj.weight", WeightRole::kSharedGate},
    HfSuffix{"mlp.shared_expert.up_proj.weight", WeightRole::kSharedUp},
    HfSuffix{"mlp.shared_expert.down_proj.weight", WeightRole::kSharedDown},
    HfSuffix{"mlp.shared_expert_gate.weight", WeightRole::kSharedExpertGate},
};

void read_qwen2moe_gguf(const GgufFile&, const std::string& p, KeyReader& keys, ModelSpec& s) {
  s.n_shared_experts = keys.optional_u64(p + "expert_shared_count").value_or(1);
  s.shared_expert_ffn_size = keys.required_u64(p + "expert_shared_feed_forward_length");
  s.shared_expert_gate = true;
}

void read_qwen2moe_hf(FieldReader& f, ModelSpec& s) {
  read_qwen_moe_hf(f, s);
  s.attn_qkv_bias = f.optional_bool("qkv_bias").value_or(true);
  s.n_shared_experts = 1;
  s.shared_expert_ffn_size = f.required_u64("shared_expert_intermediate_size");
  s.shared_expert_gate = true;
}

constexpr SpecReaders kReaders{
    .gguf = read_qwen2moe_gguf, .hf = read_qwen2moe_hf, .hf_rms_norm_eps = 1e-6};

}  // namespace

constexpr ArchitectureTraits kQwen2MoeArch{
    .architecture = Architecture::kQwen2Moe,
    .name = "qwen2moe",
    .gguf_arch = "qwen2moe",
    .hf_model_type = "qwen2_moe",
    .hf_class = "Qwen2MoeForCausalLM",
    .recipe = {.qkv_bias = true, .shared_expert = SharedExpertKind::kSigmoidGated},
    .hf = {.shared_expert = kSharedExpertNames},
    .spec_readers = &kReaders,
};

}  // namespace tandem::model
