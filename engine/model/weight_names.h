// Canonical weight names: GGUF and HF tensor names mapped onto one set of logical weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/model/architecture.h"

namespace tandem::model {

// Which naming convention a checkpoint's tensors follow.
enum class TensorNaming { kGguf, kHf };

// The logical role of one checkpoint tensor. Expert projections exist in two layouts: fused
// (one 3-D tensor for all experts of a layer: GGUF's ffn_*_exps) and per-expert (one 2-D tensor
// per expert: HF's experts.E.*, old GGUF's ffn_*.E). Both map to the same roles; `expert` is -1
// for fused tensors.
enum class WeightRole {
  kTokenEmbedding,
  kOutputNorm,
  kLmHead,
  kAttnNorm,
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnO,
  kAttnQBias,
  kAttnKBias,
  kAttnVBias,
  kAttnQNorm,
  kAttnKNorm,
  kFfnNorm,
  kRouter,
  kExpertGate,
  kExpertUp,
  kExpertDown,
  kSharedGate,
  kSharedUp,
  kSharedDown,
  kSharedExpertGate,  // the sigmoid gate's [1, hidden] weight (Qwen2-MoE)
  kDenseGate,         // FFN of a dense (non-MoE) layer
  kDenseUp,
  kDenseDown,
  kAttnOBias,       // GPT-OSS: output projection bias [hidden]
  kAttnSinks,       // GPT-OSS: one sink logit per query head [n_heads]
  kRouterBias,      // GPT-OSS: [n_experts]
  kExpertGateBias,  // GPT-OSS: all experts' biases of one layer, [n_experts, expert_ffn]
  kExpertUpBias,    // [n_experts, expert_ffn]
  kExpertDownBias,  // [n_experts, hidden]
  // Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2).
  kAttnQA,               // q down-projection [q_lora_rank, hidden]
  kAttnQANorm,           // [q_lora_rank]
  kAttnQB,               // q up-projection [n_heads * (nope + rope), q_lora_rank]
  kAttnKvA,              // compressed KV + RoPE key [kv_lora_rank + rope, hidden]
  kAttnKvANorm,          // [kv_lora_rank]
  kAttnKB,               // per head, the key up-projection transposed [n_heads, kv_lora, nope]
  kAttnVB,               // per head, the value up-projection [n_heads, v_head, kv_lora]
  kAttnKvB,              // legacy: both in one [n_heads * (nope + v_head), kv_lora_rank]
  kRouterSelectionBias,  // [n_experts], added for expert selection only (exp_probs_b)
};

// Number of WeightRole values (tables indexed by role).
inline constexpr size_t kWeightRoleCount =
    static_cast<size_t>(WeightRole::kRouterSelectionBias) + 1;

// "attn_q", "expert_gate", ... (the GGUF-like short name used in messages and `inspect`).
std::string_view weight_role_name(WeightRole role);
bool is_expert_role(WeightRole role);  // kExpertGate / kExpertUp / kExpertDown

struct CanonicalName {
  WeightRole role = WeightRole::kTokenEmbedding;
  int64_t layer = -1;   // -1 for model-level tensors
  int64_t expert = -1;  // -1 unless a per-expert tensor
  friend bool operator==(const CanonicalName&, const CanonicalName&) = default;
};

// The canonical name as text: "blk.3.expert_gate", "blk.3.expert_gate[5]", "token_embd".
std::string canonical_name_string(const CanonicalName& name);

// GGUF tensor name -> canonical name for `arch`; nullopt for names outside the architectures'
// vocabulary (reported as unused). Handles fused (blk.N.ffn_gate_exps.weight) and legacy
// per-expert (blk.N.ffn_gate.E.weight) names; blk.N.ffn_gate.weight is the dense FFN. The pre-FFN
// norm is blk.N.ffn_norm, or blk.N.post_attention_norm for GPT-OSS
// (ArchitectureTraits::gguf_ffn_norm).
std::optional<CanonicalName> canonical_from_gguf(std::string_view tensor_name, Architecture arch);

// HF (transformers) tensor name -> canonical name for `arch`; nullopt when unknown. The names
// every architecture shares, plus its own (ArchitectureTraits::hf, in
// engine/model/archs/<arch>.cpp): Mixtral and MiniMax-M2 use block_sparse_moe.{gate,
// experts.E.w1/w3/w2} (w1 = gate, w3 = up, w2 = down); the others mlp.{gate,
// experts.E.gate_proj/up_proj/down_proj}; Qwen2-MoE adds mlp.shared_expert.* and
// mlp.shared_expert_gate, DeepSeek-V3 and GLM-4.5 mlp.shared_experts.*, DeepSeek-V3 its MLA
// projections. Dense layers use mlp.{gate,up,down}_proj. GPT-OSS:
// self_attn.{q,k,v,o}_proj.{weight,bias}, self_attn.sinks, input_layernorm,
// post_attention_layernorm, mlp.router.{weight,bias}, mlp.experts.down_proj_bias; its other
// expert tensors (gate_up_proj[_blocks/_scales], gate_up_proj_bias, down_proj[_blocks/_scales])
// hold gate and up interleaved and (when float) transposed, so they map to no role: the opener
// replaces them by tensors named gpt_oss_hf_derived_name(...) (gpt_oss_hf_experts.h), which map
// to kExpertGate / kExpertUp / kExpertDown (fused) and kExpertGateBias / kExpertUpBias.
std::optional<CanonicalName> canonical_from_hf(std::string_view tensor_name, Architecture arch);

// The name of a tensor the GPT-OSS HF expert repack derives for `role` of `layer`
// (archs/gpt_oss.cpp): "model.layers.N.mlp.experts.{gate,up,down}_proj.weight" for kExpertGate /
// kExpertUp / kExpertDown, "model.layers.N.mlp.experts.{gate,up}_proj.bias" for kExpertGateBias /
// kExpertUpBias (no real gpt-oss file uses these names). Other roles: a bug (checked).
std::string gpt_oss_hf_derived_name(WeightRole role, int64_t layer);

// The name `name` has in a file of the given convention (for messages about missing tensors):
// "blk.0.ffn_gate_exps.weight" (a fused GGUF tensor when expert < 0),
// "model.layers.0.block_sparse_moe.experts.3.w1.weight". A fused expert role in HF naming is
// written with its expert index "E". GPT-OSS HF expert roles name the file tensor they come
// from: "model.layers.0.mlp.experts.gate_up_proj_blocks" (gate and up), "down_proj_blocks",
// "gate_up_proj_bias" (gate and up biases), "down_proj_bias".
std::string file_tensor_name(const CanonicalName& name, TensorNaming naming, Architecture arch);

}  // namespace tandem::model
