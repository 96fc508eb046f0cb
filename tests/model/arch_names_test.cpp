// Tests that every architecture's GGUF and HF tensor names (engine/model/archs/<arch>.cpp and the
// common tables of weight_names.cpp) round-trip: file_tensor_name -> canonical_from_gguf / _hf
// gives back each role a layer of its recipe holds.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/model/architecture.h"
#include "engine/model/layer_roles.h"
#include "engine/model/model_spec.h"
#include "engine/model/weight_names.h"

namespace tandem::model {
namespace {

// A small spec of `t` with every optional part its recipe allows present.
ModelSpec recipe_spec(const ArchitectureTraits& t, bool split_kv_b) {
  ModelSpec s;
  s.architecture = t.architecture;
  s.hidden_size = 8;
  s.n_heads = 2;
  s.n_kv_heads = 1;
  s.head_dim = 4;
  s.n_experts = 4;
  s.expert_ffn_size = 4;
  s.dense_ffn_size = 4;
  apply_recipe(t.recipe, s);
  s.router_selection_bias = t.recipe.selection_bias;
  if (t.recipe.shared_expert != SharedExpertKind::kNone) {
    s.n_shared_experts = 1;
    s.shared_expert_ffn_size = 4;
  }
  s.shared_expert_gate = t.recipe.shared_expert == SharedExpertKind::kSigmoidGated;
  if (s.attention == AttentionKind::kMla) {
    s.mla.q_lora_rank = 4;
    s.mla.kv_lora_rank = 4;
    s.mla.qk_nope_dim = 2;
    s.mla.qk_rope_dim = 2;
    s.mla.v_head_dim = 2;
    s.mla.split_kv_b = split_kv_b;
  }
  return s;
}

// The per-layer roles a MoE layer of `s` holds, or a dense one too with `dense`.
std::vector<WeightRole> layer_roles_of(const ModelSpec& s, bool dense = true) {
  std::vector<WeightRole> roles;
  for (const LayerRole& r : layer_roles()) {
    if (!r.shape(s, true).accepted.empty() || (dense && !r.shape(s, false).accepted.empty())) {
      roles.push_back(r.role);
    }
  }
  return roles;
}

TEST_CASE("every architecture's GGUF names round-trip", "[model]") {
  for (const ArchitectureTraits* t : architectures()) {
    INFO(t->name);
    REQUIRE(t->spec_readers != nullptr);
    CHECK(traits(t->architecture).name == t->name);
    for (WeightRole role :
         {WeightRole::kTokenEmbedding, WeightRole::kOutputNorm, WeightRole::kLmHead}) {
      const CanonicalName name{role};
      CHECK(canonical_from_gguf(file_tensor_name(name, TensorNaming::kGguf, t->architecture),
                                t->architecture) == name);
    }
    for (bool split : {false, true}) {
      for (WeightRole role : layer_roles_of(recipe_spec(*t, split))) {
        for (int64_t expert :
             is_expert_role(role) ? std::vector<int64_t>{-1, 3} : std::vector<int64_t>{-1}) {
          const CanonicalName name{role, 5, expert};
          const std::string file = file_tensor_name(name, TensorNaming::kGguf, t->architecture);
          INFO(file);
          CHECK(canonical_from_gguf(file, t->architecture) == name);
        }
      }
    }
  }
}

TEST_CASE("every architecture's HF names round-trip", "[model]") {
  for (const ArchitectureTraits* t : architectures()) {
    INFO(t->name);
    for (WeightRole role :
         {WeightRole::kTokenEmbedding, WeightRole::kOutputNorm, WeightRole::kLmHead}) {
      const CanonicalName name{role};
      CHECK(canonical_from_hf(file_tensor_name(name, TensorNaming::kHf, t->architecture),
                              t->architecture) == name);
    }
    // HF checkpoints hold MLA's key and value up-projections in one kv_b_proj; GPT-OSS's config
    // has no dense layers, and its names no dense FFN.
    const bool dense = t->architecture != Architecture::kGptOss;
    for (WeightRole role : layer_roles_of(recipe_spec(*t, /*split_kv_b=*/false), dense)) {
      // HF names routed experts one tensor per expert; GPT-OSS's derived tensors are fused.
      const bool derived = t->architecture == Architecture::kGptOss &&
                           (is_expert_role(role) || role == WeightRole::kExpertGateBias ||
                            role == WeightRole::kExpertUpBias);
      const CanonicalName name{role, 5, is_expert_role(role) && !derived ? 3 : -1};
      const std::string file = file_tensor_name(name, TensorNaming::kHf, t->architecture);
      INFO(file);
      if (derived) {
        // The message names the file's tensor, which maps to no role; the repack's name does.
        CHECK_FALSE(canonical_from_hf(file, t->architecture));
        CHECK(canonical_from_hf(gpt_oss_hf_derived_name(role, 5), t->architecture) == name);
      } else {
        CHECK(canonical_from_hf(file, t->architecture) == name);
      }
    }
  }
}

TEST_CASE("an architecture's own HF names belong to it alone", "[model]") {
  CHECK(canonical_from_hf("model.layers.0.self_attn.q_a_proj.weight", Architecture::kDeepseek2) ==
        CanonicalName{WeightRole::kAttnQA, 0, -1});
  CHECK_FALSE(
      canonical_from_hf("model.layers.0.self_attn.q_a_proj.weight", Architecture::kQwen3Moe));
  CHECK(canonical_from_hf("model.layers.0.mlp.shared_experts.up_proj.weight",
                          Architecture::kGlm4Moe) == CanonicalName{WeightRole::kSharedUp, 0, -1});
  CHECK_FALSE(
      canonical_from_hf("model.layers.0.mlp.shared_expert.up_proj.weight", Architecture::kGlm4Moe));
  CHECK(file_tensor_name({WeightRole::kSharedDown, 2, -1}, TensorNaming::kHf,
                         Architecture::kDeepseek2) ==
        "model.layers.2.mlp.shared_experts.down_proj.weight");
  CHECK(file_tensor_name({WeightRole::kRouterSelectionBias, 2, -1}, TensorNaming::kHf,
                         Architecture::kMinimaxM2) ==
        "model.layers.2.block_sparse_moe.e_score_correction_bias");
}

}  // namespace
}  // namespace tandem::model
