// deepseek2 (DeepSeek-V2/V3/R1, Kimi-K2, Moonlight, GLM-4.7-Flash): its names (the MLA
// projections, the shared experts), recipe, and spec readers: MLA sizes, the DeepSeek router, the
// plain shared expert and DeepSeek's YaRN attention factor, from GGUF (llama.cpp's
// src/models/deepseek2.cpp; shared/data/tiny-deepseek2/README.md) and from HF DeepseekV3 configs
// (transformers' modeling_deepseek_v3.py).
#include <array>
#include <cmath>
#include <string>

#include <spdlog/spdlog.h>

#include "engine/model/archs/archs.h"

namespace tandem::model {

namespace {

// Multi-head latent attention's projections (kv_b_proj: the legacy one-matrix layout).
constexpr std::array kMlaNames = {
    HfSuffix{"self_attn.q_a_proj.weight", WeightRole::kAttnQA},
    HfSuffix{"self_attn.q_a_layernorm.weight", WeightRole::kAttnQANorm},
    HfSuffix{"self_attn.q_b_proj.weight", WeightRole::kAttnQB},
    HfSuffix{"self_attn.kv_a_proj_with_mqa.weight", WeightRole::kAttnKvA},
    HfSuffix{"self_attn.kv_a_layernorm.weight", WeightRole::kAttnKvANorm},
    HfSuffix{"self_attn.kv_b_proj.weight", WeightRole::kAttnKvB},
};

// The softmax scale of MLA scores: 1 / sqrt(nope + rope), times mscale^2 with YaRN, where
// mscale = 1 + 0.1 mscale_all_dim ln(factor) (all_dim 0: 1 + 0.1 ln(factor), llama.cpp without
// the key). Float arithmetic, as llama.cpp's kq_scale.
double mla_softmax_scale(const ModelSpec& s) {
  float mscale = 1.0f;
  if (s.rope.scaling == RopeScalingType::kYarn && s.rope.scaling_factor > 1.0) {
    const float log_factor = std::log(static_cast<float>(s.rope.scaling_factor));
    const float all_dim = static_cast<float>(s.rope.yarn_mscale_all_dim);
    mscale = all_dim != 0.0f ? 1.0f + 0.1f * all_dim * log_factor : 1.0f + 0.1f * log_factor;
  }
  return mscale * mscale / std::sqrt(static_cast<float>(s.mla.q_head_dim()));
}

// What every MLA spec shares once its MlaSpec is read: one cached latent row as the only KV
// head, RoPE on the rope part only.
void finish_mla(ModelSpec& s) {
  s.n_kv_heads = 1;
  s.head_dim = s.mla.cache_row();
  s.head_dim_explicit = true;
  s.rope.n_dims = s.mla.qk_rope_dim;
  s.attn_scale = mla_softmax_scale(s);
}

//  - Layout: key_length_mla + value_length_mla present = split attn_k_b / attn_v_b, one KV head,
//    key_length = kv_lora + rope; absent = legacy attn_kv_b, key/value_length the head sizes.
//  - No expert_gating_func: softmax (DeepSeek-V2 files), except GLM-4.7-Lite (47/48 layers,
//    vocab 154880: sigmoid), as llama.cpp guesses.
//  - rope.scaling.yarn_log_multiplier holds 0.1 x mscale_all_dim.
void read_deepseek2_gguf(const GgufFile& file, const std::string& p, KeyReader& keys,
                         ModelSpec& s) {
  MlaSpec& m = s.mla;
  m.kv_lora_rank = keys.required_u64(p + "attention.kv_lora_rank");
  m.qk_rope_dim = keys.required_u64(p + "rope.dimension_count");
  const uint64_t key_length = keys.required_u64(p + "attention.key_length");
  const uint64_t value_length = keys.required_u64(p + "attention.value_length");
  const std::optional<uint64_t> k_mla = keys.optional_u64(p + "attention.key_length_mla");
  const std::optional<uint64_t> v_mla = keys.optional_u64(p + "attention.value_length_mla");
  m.split_kv_b = k_mla.has_value() && v_mla.has_value();
  const uint64_t q_head = m.split_kv_b ? *k_mla : key_length;
  m.v_head_dim = m.split_kv_b ? *v_mla : value_length;
  if (q_head <= m.qk_rope_dim) {
    keys.problem(p + "attention.key_length" + (m.split_kv_b ? "_mla" : "") + " (" +
                 std::to_string(q_head) + ") must exceed rope.dimension_count (" +
                 std::to_string(m.qk_rope_dim) + ")");
  } else {
    m.qk_nope_dim = q_head - m.qk_rope_dim;
  }
  if (m.split_kv_b && (key_length != m.cache_row() || value_length != m.kv_lora_rank)) {
    keys.problem(p + "attention.key_length / value_length (" + std::to_string(key_length) + " / " +
                 std::to_string(value_length) + ") should be kv_lora_rank + rope (" +
                 std::to_string(m.cache_row()) + ") / kv_lora_rank (" +
                 std::to_string(m.kv_lora_rank) + ") in the MLA layout");
  }
  const bool has_q_a = file.find_tensor("blk.0.attn_q_a.weight") != nullptr;
  m.q_lora_rank = has_q_a ? keys.required_u64(p + "attention.q_lora_rank") : 0;
  s.rope.type = RopeType::kNormal;  // GGUF deepseek2 is LLAMA_ROPE_TYPE_NORM
  if (s.rope.scaling == RopeScalingType::kYarn) {
    if (std::optional<double> mul = keys.optional_f64(p + "rope.scaling.yarn_log_multiplier")) {
      s.rope.yarn_mscale_all_dim = static_cast<float>(*mul) / 0.1f;
    }
  }
  // Whatever head_count_kv says (1 in the MLA layout, n_heads in the legacy one): one latent row.
  finish_mla(s);
  const bool glm47_lite = (s.n_layers == 47 || s.n_layers == 48) && s.vocab_size == 154880;
  read_sigmoid_router_gguf(file, p, keys, glm47_lite ? kGatingSigmoid : kGatingSoftmax,
                           /*shared=*/true, s);
}

void read_deepseek_v3_hf(FieldReader& f, ModelSpec& s) {
  MlaSpec& m = s.mla;
  m.q_lora_rank = f.optional_u64("q_lora_rank").value_or(0);  // null in the "lite" models
  m.kv_lora_rank = f.required_u64("kv_lora_rank");
  m.qk_nope_dim = f.required_u64("qk_nope_head_dim");
  m.qk_rope_dim = f.required_u64("qk_rope_head_dim");
  m.v_head_dim = f.required_u64("v_head_dim");
  m.split_kv_b = false;  // kv_b_proj: per head nope key rows, then v_head value rows
  // rope_interleave (the default) de-interleaves q_pe / k_pe before rotate_half: pairs (2i, 2i+1)
  // of the checkpoint's rows, GGUF's NORM layout; false rotates halves.
  s.rope.type =
      f.optional_bool("rope_interleave").value_or(true) ? RopeType::kNormal : RopeType::kNeox;
  if (f.optional_bool("attention_bias").value_or(false)) {
    f.problem("attention_bias = true is not supported for deepseek_v3");
  }
  read_deepseek_style_moe_hf(f, s);
  // DeepSeek-V2 (model_type deepseek_v2): softmax scores, no selection bias, and its router never
  // renormalises whatever norm_topk_prob says; group_limited_greedy scores a group by its best
  // expert. DeepSeek-V3's noaux_tc (or no topk_method) keeps the sigmoid reading above.
  std::string topk = f.optional_string("topk_method");
  if (topk.empty()) topk = "noaux_tc";
  if (topk == "greedy" || topk == "group_limited_greedy") {
    s.routing = RoutingPolicy::kSoftmaxTopK;
    s.router_selection_bias = false;
    s.norm_topk_prob = false;
    if (topk == "greedy") {
      s.n_expert_groups = 0;
      s.n_expert_groups_used = 0;
    }
    s.expert_group_score_top = 1;
  } else if (topk != "noaux_tc") {
    f.problem("topk_method '" + topk +
              "' is not supported (greedy, group_limited_greedy, noaux_tc)");
  }
  finish_mla(s);
}

constexpr SpecReaders kReaders{.gguf = read_deepseek2_gguf, .hf = read_deepseek_v3_hf};

// Checkpoints in DeepSeek-V3's layout under other model_types: DeepSeek-V2 (its router read from
// topk_method) and Kimi-K2.
constexpr std::array<std::string_view, 2> kHfModelTypeAliases = {"deepseek_v2", "kimi_k2"};

}  // namespace

void read_sigmoid_router_gguf(const GgufFile& file, const std::string& p, KeyReader& keys,
                              uint64_t default_gating, bool shared, ModelSpec& s) {
  s.n_expert_groups = keys.optional_u64(p + "expert_group_count").value_or(0);
  s.n_expert_groups_used = keys.optional_u64(p + "expert_group_used_count").value_or(0);
  s.expert_weights_scale = keys.optional_f64(p + "expert_weights_scale").value_or(0.0);
  if (s.expert_weights_scale == 0.0) s.expert_weights_scale = 1.0;  // llama.cpp skips 0 and 1
  uint64_t gating = keys.optional_u64(p + "expert_gating_func").value_or(0);
  if (gating == 0) gating = default_gating;
  if (gating == kGatingSoftmax) {
    s.routing = RoutingPolicy::kSoftmaxTopK;
  } else if (gating == kGatingSigmoid) {
    s.routing = RoutingPolicy::kSigmoidTopK;
  } else {
    keys.problem(p + "expert_gating_func " + std::to_string(gating) +
                 " is not supported (1 = softmax, 2 = sigmoid)");
  }
  s.router_selection_bias =
      s.n_layers > 0 &&
      file.find_tensor("blk." + std::to_string(s.n_layers - 1) + ".exp_probs_b.bias") != nullptr;
  if (shared) {
    s.n_shared_experts = keys.required_u64(p + "expert_shared_count");
    s.shared_expert_ffn_size = s.expert_ffn_size * s.n_shared_experts;
  }
  s.shared_expert_gate = false;
}

void read_deepseek_style_moe_hf(FieldReader& f, ModelSpec& s) {
  s.n_experts = f.required_u64("n_routed_experts");
  s.n_experts_used = f.required_u64("num_experts_per_tok");
  s.expert_ffn_size = f.required_u64("moe_intermediate_size");
  s.norm_topk_prob = f.optional_bool("norm_topk_prob").value_or(false);
  s.expert_weights_scale = f.optional_f64("routed_scaling_factor").value_or(1.0);
  s.n_expert_groups = f.optional_u64("n_group").value_or(0);
  s.n_expert_groups_used = f.optional_u64("topk_group").value_or(0);
  s.routing = RoutingPolicy::kSigmoidTopK;
  s.router_selection_bias = true;  // e_score_correction_bias: a buffer every checkpoint saves
  s.n_shared_experts = f.optional_u64("n_shared_experts").value_or(0);
  s.shared_expert_ffn_size = s.n_shared_experts * s.expert_ffn_size;
  s.shared_expert_gate = false;
  const uint64_t dense = f.optional_u64("first_k_dense_replace").value_or(0);
  for (uint64_t i = 0; i < dense && i < s.moe_layers.size(); ++i) s.moe_layers[i] = false;
  if (dense > 0) s.dense_ffn_size = f.required_u64("intermediate_size");
  if (const std::optional<uint64_t> mtp = f.optional_u64("num_nextn_predict_layers");
      mtp && *mtp > 0) {
    spdlog::info("{} multi-token-prediction layer(s) after layer {} are not run", *mtp,
                 s.n_layers - 1);
  }
}

// MLA, sigmoid routing with an optional selection bias (the gating key may say softmax:
// read_deepseek2_gguf), a plain shared expert (llama.cpp's src/models/deepseek2.cpp).
constexpr ArchitectureTraits kDeepseek2Arch{
    .architecture = Architecture::kDeepseek2,
    .name = "deepseek2",
    .gguf_arch = "deepseek2",
    .hf_model_type = "deepseek_v3",
    .hf_model_type_aliases = kHfModelTypeAliases,
    .hf_class = "DeepseekV3ForCausalLM",
    .recipe = {.attention = AttentionKind::kMla,
               .routing = RoutingPolicy::kSigmoidTopK,
               .selection_bias = true,
               .shared_expert = SharedExpertKind::kPlain},
    .hf = {.shared_expert = kDeepseekSharedExpertNames, .extra = kMlaNames},
    .spec_readers = &kReaders,
};

}  // namespace tandem::model
