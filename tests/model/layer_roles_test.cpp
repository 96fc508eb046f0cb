// The layer-role table: which roles a layer of a spec has, and their shapes.
#include "engine/model/layer_roles.h"

#include <set>

#include <catch2/catch.hpp>

namespace tandem::model {
namespace {

using R = WeightRole;

// The roles a layer of `spec` has (moe: a MoE layer).
std::set<WeightRole> roles_of(const ModelSpec& spec, bool moe) {
  std::set<WeightRole> out;
  for (const LayerRole& r : layer_roles()) {
    if (!r.shape(spec, moe).accepted.empty()) out.insert(r.role);
  }
  return out;
}

ModelSpec gqa_spec() {
  ModelSpec s;
  s.attention = AttentionKind::kGqa;
  s.hidden_size = 64;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 16;
  s.n_experts = 8;
  s.expert_ffn_size = 32;
  s.dense_ffn_size = 96;
  return s;
}

ModelSpec mla_spec(uint64_t q_lora_rank, bool split_kv_b) {
  ModelSpec s = gqa_spec();
  s.attention = AttentionKind::kMla;
  s.mla.q_lora_rank = q_lora_rank;
  s.mla.kv_lora_rank = 32;
  s.mla.qk_nope_dim = 16;
  s.mla.qk_rope_dim = 8;
  s.mla.v_head_dim = 12;
  s.mla.split_kv_b = split_kv_b;
  return s;
}

TEST_CASE("layer_roles: every per-layer role has one row and the model-level roles none") {
  std::set<WeightRole> seen;
  for (const LayerRole& r : layer_roles()) {
    CHECK(seen.insert(r.role).second);
    CHECK(&layer_role(r.role) == &r);
  }
  CHECK(seen.size() + 3 == kWeightRoleCount);
  for (WeightRole model_level : {R::kTokenEmbedding, R::kOutputNorm, R::kLmHead}) {
    CHECK(seen.count(model_level) == 0);
  }
}

TEST_CASE("layer_roles: a plain GQA MoE layer and a dense layer") {
  const ModelSpec s = gqa_spec();
  CHECK(roles_of(s, true) == std::set<WeightRole>{R::kAttnNorm, R::kAttnQ, R::kAttnK, R::kAttnV,
                                                  R::kAttnO, R::kFfnNorm, R::kRouter,
                                                  R::kExpertGate, R::kExpertUp, R::kExpertDown});
  CHECK(roles_of(s, false) == std::set<WeightRole>{R::kAttnNorm, R::kAttnQ, R::kAttnK, R::kAttnV,
                                                   R::kAttnO, R::kFfnNorm, R::kDenseGate,
                                                   R::kDenseUp, R::kDenseDown});
  CHECK(layer_role(R::kAttnK).shape(s, true).accepted ==
        std::vector<std::vector<uint64_t>>{{32, 64}});
  CHECK(layer_role(R::kExpertDown).shape(s, true).accepted ==
        std::vector<std::vector<uint64_t>>{{64, 32}});
  CHECK(layer_role(R::kDenseDown).shape(s, false).accepted ==
        std::vector<std::vector<uint64_t>>{{64, 96}});
}

TEST_CASE("layer_roles: the spec's flags add biases, norms, sinks and shared experts") {
  ModelSpec s = gqa_spec();
  s.attn_qkv_bias = true;
  s.attn_out_bias = true;
  s.attn_sinks = true;
  s.qk_norm = QkNorm::kWholeProjection;
  s.router_bias = true;
  s.router_selection_bias = true;
  s.expert_bias = true;
  s.n_shared_experts = 1;
  s.shared_expert_ffn_size = 48;
  s.shared_expert_gate = true;
  const std::set<WeightRole> moe = roles_of(s, true);
  for (WeightRole r : {R::kAttnQBias, R::kAttnKBias, R::kAttnVBias, R::kAttnOBias, R::kAttnSinks,
                       R::kAttnQNorm, R::kAttnKNorm, R::kRouterBias, R::kRouterSelectionBias,
                       R::kExpertGateBias, R::kExpertUpBias, R::kExpertDownBias, R::kSharedGate,
                       R::kSharedUp, R::kSharedDown, R::kSharedExpertGate}) {
    CHECK(moe.count(r) == 1);
  }
  // Router and expert parts belong to MoE layers only.
  const std::set<WeightRole> dense = roles_of(s, false);
  CHECK(dense.count(R::kRouterBias) == 0);
  CHECK(dense.count(R::kSharedGate) == 0);
  CHECK(dense.count(R::kAttnSinks) == 1);
  CHECK(layer_role(R::kAttnKNorm).shape(s, true).accepted ==
        std::vector<std::vector<uint64_t>>{{32}});
  s.qk_norm = QkNorm::kPerHead;
  CHECK(layer_role(R::kAttnKNorm).shape(s, true).accepted ==
        std::vector<std::vector<uint64_t>>{{16}});
  // HF writes the shared expert's gate as [1, hidden], GGUF as [hidden].
  CHECK(layer_role(R::kSharedExpertGate).shape(s, true).accepted ==
        std::vector<std::vector<uint64_t>>{{1, 64}, {64}});
}

TEST_CASE("layer_roles: MLA with and without a low-rank q, split and legacy kv_b") {
  const std::set<WeightRole> common = {R::kAttnNorm,   R::kAttnKvA,  R::kAttnKvANorm,
                                       R::kAttnO,      R::kFfnNorm,  R::kRouter,
                                       R::kExpertGate, R::kExpertUp, R::kExpertDown};
  std::set<WeightRole> v3 = common;
  v3.insert({R::kAttnQA, R::kAttnQANorm, R::kAttnQB, R::kAttnKB, R::kAttnVB});
  CHECK(roles_of(mla_spec(24, true), true) == v3);
  std::set<WeightRole> lite_legacy = common;
  lite_legacy.insert({R::kAttnQ, R::kAttnKvB});
  CHECK(roles_of(mla_spec(0, false), true) == lite_legacy);

  const ModelSpec s = mla_spec(24, true);
  CHECK(layer_role(R::kAttnQB).shape(s, true).accepted ==
        std::vector<std::vector<uint64_t>>{{4 * 24, 24}});
  CHECK(layer_role(R::kAttnKvA).shape(s, true).accepted ==
        std::vector<std::vector<uint64_t>>{{32 + 8, 64}});
  CHECK(layer_role(R::kAttnKB).shape(s, true).accepted ==
        std::vector<std::vector<uint64_t>>{{4, 32, 16}});
  CHECK(layer_role(R::kAttnO).shape(s, true).accepted ==
        std::vector<std::vector<uint64_t>>{{64, 4 * 12}});
  CHECK(layer_role(R::kAttnQ).shape(mla_spec(0, true), true).accepted ==
        std::vector<std::vector<uint64_t>>{{4 * 24, 64}});
  CHECK(layer_role(R::kAttnKvB).shape(mla_spec(0, false), true).accepted ==
        std::vector<std::vector<uint64_t>>{{4 * (16 + 12), 32}});
}

}  // namespace
}  // namespace tandem::model
