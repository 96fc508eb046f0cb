// The layer-role table: which layers have each per-layer weight and its shape.
#include "engine/model/layer_roles.h"

#include <array>

#include "base/check.h"

namespace tandem::model {
namespace {

using R = WeightRole;
using U = RoleUse;
using Shape = std::vector<uint64_t>;

// The layer has no such tensor.
RoleShape none() {
  return {};
}

RoleShape one(Shape shape, std::string_view what) {
  return {{std::move(shape)}, what};
}

bool gqa(const ModelSpec& s) {
  return s.attention == AttentionKind::kGqa;
}
bool mla(const ModelSpec& s) {
  return s.attention == AttentionKind::kMla;
}
bool mla_low_rank_q(const ModelSpec& s) {
  return mla(s) && s.mla.q_lora_rank > 0;
}

RoleShape hidden_vector(const ModelSpec& s, bool) {
  return one({s.hidden_size}, "(hidden_size)");
}

RoleShape attn_q(const ModelSpec& s, bool) {
  if (gqa(s)) return one({s.q_dim(), s.hidden_size}, "(n_heads*head_dim, hidden)");
  if (mla_low_rank_q(s)) return none();
  return one({s.n_heads * s.mla.q_head_dim(), s.hidden_size},
             "(n_heads*(qk_nope+qk_rope), hidden)");
}

RoleShape attn_kv(const ModelSpec& s, bool) {
  if (!gqa(s)) return none();
  return one({s.kv_dim(), s.hidden_size}, "(n_kv_heads*head_dim, hidden)");
}

RoleShape attn_o(const ModelSpec& s, bool) {
  return one({s.hidden_size, s.attn_out_dim()},
             gqa(s) ? "(hidden, n_heads*head_dim)" : "(hidden, n_heads*v_head)");
}

RoleShape attn_o_bias(const ModelSpec& s, bool) {
  return gqa(s) && s.attn_out_bias ? one({s.hidden_size}, "(hidden_size)") : none();
}

RoleShape attn_sinks(const ModelSpec& s, bool) {
  return gqa(s) && s.attn_sinks ? one({s.n_heads}, "(n_heads)") : none();
}

RoleShape attn_q_bias(const ModelSpec& s, bool) {
  return gqa(s) && s.attn_qkv_bias ? one({s.q_dim()}, "(n_heads*head_dim)") : none();
}

RoleShape attn_kv_bias(const ModelSpec& s, bool) {
  return gqa(s) && s.attn_qkv_bias ? one({s.kv_dim()}, "(kv dim)") : none();
}

RoleShape attn_q_norm(const ModelSpec& s, bool) {
  if (!gqa(s)) return none();
  if (s.qk_norm == QkNorm::kPerHead) return one({s.head_dim}, "(head_dim)");
  if (s.qk_norm == QkNorm::kWholeProjection) return one({s.q_dim()}, "(n_heads*head_dim)");
  return none();
}

RoleShape attn_k_norm(const ModelSpec& s, bool) {
  if (!gqa(s)) return none();
  if (s.qk_norm == QkNorm::kPerHead) return one({s.head_dim}, "(head_dim)");
  if (s.qk_norm == QkNorm::kWholeProjection) return one({s.kv_dim()}, "(n_kv_heads*head_dim)");
  return none();
}

RoleShape mla_q_a(const ModelSpec& s, bool) {
  if (!mla_low_rank_q(s)) return none();
  return one({s.mla.q_lora_rank, s.hidden_size}, "(q_lora_rank, hidden)");
}

RoleShape mla_q_a_norm(const ModelSpec& s, bool) {
  return mla_low_rank_q(s) ? one({s.mla.q_lora_rank}, "(q_lora_rank)") : none();
}

RoleShape mla_q_b(const ModelSpec& s, bool) {
  if (!mla_low_rank_q(s)) return none();
  return one({s.n_heads * s.mla.q_head_dim(), s.mla.q_lora_rank},
             "(n_heads*(qk_nope+qk_rope), q_lora_rank)");
}

RoleShape mla_kv_a(const ModelSpec& s, bool) {
  if (!mla(s)) return none();
  return one({s.mla.cache_row(), s.hidden_size}, "(kv_lora_rank+qk_rope, hidden)");
}

RoleShape mla_kv_a_norm(const ModelSpec& s, bool) {
  return mla(s) ? one({s.mla.kv_lora_rank}, "(kv_lora_rank)") : none();
}

RoleShape mla_k_b(const ModelSpec& s, bool) {
  if (!mla(s) || !s.mla.split_kv_b) return none();
  return one({s.n_heads, s.mla.kv_lora_rank, s.mla.qk_nope_dim},
             "(n_heads, kv_lora_rank, qk_nope)");
}

RoleShape mla_v_b(const ModelSpec& s, bool) {
  if (!mla(s) || !s.mla.split_kv_b) return none();
  return one({s.n_heads, s.mla.v_head_dim, s.mla.kv_lora_rank}, "(n_heads, v_head, kv_lora_rank)");
}

RoleShape mla_kv_b(const ModelSpec& s, bool) {
  if (!mla(s) || s.mla.split_kv_b) return none();
  return one({s.n_heads * (s.mla.qk_nope_dim + s.mla.v_head_dim), s.mla.kv_lora_rank},
             "(n_heads*(qk_nope+v_head), kv_lora_rank)");
}

RoleShape dense_gate_up(const ModelSpec& s, bool moe) {
  return moe ? none() : one({s.dense_ffn_size, s.hidden_size}, "(dense_ffn, hidden)");
}

RoleShape dense_down(const ModelSpec& s, bool moe) {
  return moe ? none() : one({s.hidden_size, s.dense_ffn_size}, "(hidden, dense_ffn)");
}

RoleShape router(const ModelSpec& s, bool moe) {
  return moe ? one({s.n_experts, s.hidden_size}, "(n_experts, hidden)") : none();
}

RoleShape router_bias(const ModelSpec& s, bool moe) {
  return moe && s.router_bias ? one({s.n_experts}, "(n_experts)") : none();
}

RoleShape selection_bias(const ModelSpec& s, bool moe) {
  return moe && s.router_selection_bias ? one({s.n_experts}, "(n_experts)") : none();
}

RoleShape expert_ffn_bias(const ModelSpec& s, bool moe) {
  if (!moe || !s.expert_bias) return none();
  return one({s.n_experts, s.expert_ffn_size}, "(n_experts, expert_ffn)");
}

RoleShape expert_down_bias(const ModelSpec& s, bool moe) {
  if (!moe || !s.expert_bias) return none();
  return one({s.n_experts, s.hidden_size}, "(n_experts, hidden)");
}

RoleShape expert_gate_up(const ModelSpec& s, bool moe) {
  return moe ? one({s.expert_ffn_size, s.hidden_size}, "(expert_ffn, hidden)") : none();
}

RoleShape expert_down(const ModelSpec& s, bool moe) {
  return moe ? one({s.hidden_size, s.expert_ffn_size}, "(hidden, expert_ffn)") : none();
}

RoleShape shared_gate_up(const ModelSpec& s, bool moe) {
  if (!moe || s.n_shared_experts == 0) return none();
  return one({s.shared_expert_ffn_size, s.hidden_size}, "(shared_ffn, hidden)");
}

RoleShape shared_down(const ModelSpec& s, bool moe) {
  if (!moe || s.n_shared_experts == 0) return none();
  return one({s.hidden_size, s.shared_expert_ffn_size}, "(hidden, shared_ffn)");
}

// HF writes the sigmoid gate as a [1, hidden] matrix, GGUF as a [hidden] vector.
RoleShape shared_expert_gate(const ModelSpec& s, bool moe) {
  if (!moe || !s.shared_expert_gate) return none();
  return {{{1, s.hidden_size}, {s.hidden_size}}, "([1, hidden] or [hidden])"};
}

const std::array kLayerRoles = {
    LayerRole{R::kAttnNorm, "attn_norm", U::kVector, hidden_vector},
    LayerRole{R::kAttnQA, "attn_q_a", U::kMatrix, mla_q_a, true},
    LayerRole{R::kAttnQANorm, "attn_q_a_norm", U::kVector, mla_q_a_norm},
    LayerRole{R::kAttnQB, "attn_q_b", U::kMatrix, mla_q_b, true},
    LayerRole{R::kAttnQ, "attn_q", U::kMatrix, attn_q, true},
    LayerRole{R::kAttnK, "attn_k", U::kMatrix, attn_kv, true},
    LayerRole{R::kAttnV, "attn_v", U::kMatrix, attn_kv, true},
    LayerRole{R::kAttnKvA, "attn_kv_a_mqa", U::kMatrix, mla_kv_a, true},
    LayerRole{R::kAttnKvANorm, "attn_kv_a_norm", U::kVector, mla_kv_a_norm},
    LayerRole{R::kAttnKB, "attn_k_b", U::kHeadMatrices, mla_k_b},
    LayerRole{R::kAttnVB, "attn_v_b", U::kHeadMatrices, mla_v_b},
    LayerRole{R::kAttnKvB, "attn_kv_b", U::kHeadMatrices, mla_kv_b},
    LayerRole{R::kAttnO, "attn_output", U::kMatrix, attn_o, true},
    LayerRole{R::kAttnOBias, "attn_output.bias", U::kVector, attn_o_bias},
    LayerRole{R::kAttnSinks, "attn_sinks", U::kVector, attn_sinks},
    LayerRole{R::kAttnQBias, "attn_q.bias", U::kVector, attn_q_bias},
    LayerRole{R::kAttnKBias, "attn_k.bias", U::kVector, attn_kv_bias},
    LayerRole{R::kAttnVBias, "attn_v.bias", U::kVector, attn_kv_bias},
    LayerRole{R::kAttnQNorm, "attn_q_norm", U::kVector, attn_q_norm},
    LayerRole{R::kAttnKNorm, "attn_k_norm", U::kVector, attn_k_norm},
    LayerRole{R::kFfnNorm, "ffn_norm", U::kVector, hidden_vector},
    LayerRole{R::kDenseGate, "ffn_gate", U::kMatrix, dense_gate_up, true},
    LayerRole{R::kDenseUp, "ffn_up", U::kMatrix, dense_gate_up, true},
    LayerRole{R::kDenseDown, "ffn_down", U::kMatrix, dense_down, true},
    LayerRole{R::kRouter, "ffn_gate_inp", U::kMatrix, router},
    LayerRole{R::kRouterBias, "ffn_gate_inp.bias", U::kVector, router_bias},
    LayerRole{R::kRouterSelectionBias, "exp_probs_b.bias", U::kVector, selection_bias},
    LayerRole{R::kExpertGateBias, "ffn_gate_exps.bias", U::kExpertBias, expert_ffn_bias},
    LayerRole{R::kExpertUpBias, "ffn_up_exps.bias", U::kExpertBias, expert_ffn_bias},
    LayerRole{R::kExpertDownBias, "ffn_down_exps.bias", U::kExpertBias, expert_down_bias},
    LayerRole{R::kExpertGate, "ffn_gate_exps", U::kExperts, expert_gate_up},
    LayerRole{R::kExpertUp, "ffn_up_exps", U::kExperts, expert_gate_up},
    LayerRole{R::kExpertDown, "ffn_down_exps", U::kExperts, expert_down},
    LayerRole{R::kSharedGate, "ffn_gate_shexp", U::kMatrix, shared_gate_up, true},
    LayerRole{R::kSharedUp, "ffn_up_shexp", U::kMatrix, shared_gate_up, true},
    LayerRole{R::kSharedDown, "ffn_down_shexp", U::kMatrix, shared_down, true},
    LayerRole{R::kSharedExpertGate, "ffn_gate_inp_shexp", U::kMatrix, shared_expert_gate},
};

// Every WeightRole but the three model-level ones has exactly one entry.
constexpr size_t kModelLevelRoles = 3;
static_assert(kLayerRoles.size() + kModelLevelRoles == kWeightRoleCount,
              "every per-layer WeightRole needs its row in kLayerRoles");

}  // namespace

std::span<const LayerRole> layer_roles() {
  return kLayerRoles;
}

const LayerRole& layer_role(WeightRole role) {
  for (const LayerRole& r : kLayerRoles) {
    if (r.role == role) return r;
  }
  TANDEM_CHECK_MSG(false, "not a per-layer role");
  return kLayerRoles[0];
}

}  // namespace tandem::model
