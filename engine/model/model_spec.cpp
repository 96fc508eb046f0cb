// ModelSpec helpers: names of RoPE variants and the hyper-parameter consistency check.
#include "engine/model/model_spec.h"

#include <string>

namespace tandem::model {

std::string_view rope_type_name(RopeType type) {
  return type == RopeType::kNormal ? "normal" : "neox";
}

std::string_view rope_scaling_type_name(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kNone:
      return "none";
    case RopeScalingType::kLinear:
      return "linear";
    case RopeScalingType::kDynamic:
      return "dynamic";
    case RopeScalingType::kYarn:
      return "yarn";
    case RopeScalingType::kLongRope:
      return "longrope";
    case RopeScalingType::kLlama3:
      return "llama3";
  }
  return "unknown";
}

void apply_recipe(const LayerRecipe& recipe, ModelSpec& spec) {
  spec.attention = recipe.attention;
  spec.qk_norm = recipe.qk_norm;
  spec.attn_qkv_bias = recipe.qkv_bias;
  spec.attn_out_bias = recipe.attn_out_bias;
  spec.attn_sinks = recipe.attn_sinks;
  spec.routing = recipe.routing;
  spec.router_bias = recipe.router_bias;
  spec.expert_activation = recipe.activation;
  spec.expert_bias = recipe.expert_bias;
}

uint64_t ModelSpec::n_moe_layers() const {
  uint64_t n = 0;
  for (bool moe : moe_layers) n += moe ? 1 : 0;
  return n;
}

namespace {

std::string num(uint64_t v) {
  return std::to_string(v);
}

void require_positive(std::string_view field, uint64_t value, std::vector<std::string>& problems) {
  if (value == 0) problems.push_back(std::string(field) + " is 0");
}

void check_mla(const ModelSpec& s, std::vector<std::string>& problems) {
  const MlaSpec& m = s.mla;
  require_positive("kv_lora_rank", m.kv_lora_rank, problems);
  require_positive("qk_nope_head_dim", m.qk_nope_dim, problems);
  require_positive("qk_rope_head_dim", m.qk_rope_dim, problems);
  require_positive("v_head_dim", m.v_head_dim, problems);
  if (m.qk_rope_dim % 2 != 0)
    problems.push_back("qk_rope_head_dim (" + num(m.qk_rope_dim) + ") is odd");
  if (s.n_kv_heads != 1 || s.head_dim != m.cache_row()) {
    problems.push_back("MLA needs one KV head of kv_lora_rank + qk_rope_head_dim (" +
                       num(m.cache_row()) + ") values");
  }
  if (s.rope.n_dims != m.qk_rope_dim) {
    problems.push_back("rope dimensions (" + num(s.rope.n_dims) + ") != qk_rope_head_dim (" +
                       num(m.qk_rope_dim) + ")");
  }
  if (s.qk_norm != QkNorm::kNone || s.attn_qkv_bias || s.attn_sinks || !s.swa_layers.empty()) {
    problems.push_back("MLA takes no Q/K norm, q/k/v bias, sinks or sliding window");
  }
}

}  // namespace

void check_spec(const ModelSpec& s, std::vector<std::string>& problems) {
  require_positive("n_layers", s.n_layers, problems);
  require_positive("hidden_size", s.hidden_size, problems);
  require_positive("n_heads", s.n_heads, problems);
  require_positive("n_kv_heads", s.n_kv_heads, problems);
  require_positive("head_dim", s.head_dim, problems);
  require_positive("vocab_size", s.vocab_size, problems);
  require_positive("context_length", s.context_length, problems);
  require_positive("n_experts", s.n_experts, problems);
  require_positive("n_experts_used", s.n_experts_used, problems);
  require_positive("expert_ffn_size", s.expert_ffn_size, problems);
  if (s.n_layers > kMaxLayers) {
    problems.push_back("n_layers (" + num(s.n_layers) + ") > " + num(kMaxLayers));
  }
  if (s.n_experts > kMaxExperts) {
    problems.push_back("n_experts (" + num(s.n_experts) + ") > " + num(kMaxExperts));
  }
  if (s.n_experts_used > s.n_experts) {
    problems.push_back("n_experts_used (" + num(s.n_experts_used) + ") > n_experts (" +
                       num(s.n_experts) + ")");
  }
  if (s.n_heads != 0 && s.n_kv_heads != 0 && s.n_heads % s.n_kv_heads != 0) {
    problems.push_back("n_heads (" + num(s.n_heads) + ") is not a multiple of n_kv_heads (" +
                       num(s.n_kv_heads) + ")");
  }
  if (s.n_kv_heads > s.n_heads) {
    problems.push_back("n_kv_heads (" + num(s.n_kv_heads) + ") > n_heads (" + num(s.n_heads) + ")");
  }
  if (!s.head_dim_explicit && s.n_heads != 0 && s.hidden_size != s.n_heads * s.head_dim) {
    problems.push_back("hidden_size (" + num(s.hidden_size) + ") != n_heads (" + num(s.n_heads) +
                       ") * head_dim (" + num(s.head_dim) + ")");
  }
  if (s.rope.n_dims > s.head_dim || s.rope.n_dims % 2 != 0) {
    problems.push_back("rope dimensions (" + num(s.rope.n_dims) +
                       ") must be even and <= head_dim (" + num(s.head_dim) + ")");
  }
  if (!(s.rope.theta > 0.0)) problems.push_back("rope theta must be > 0");
  if (s.rope.scaling != RopeScalingType::kNone && !(s.rope.scaling_factor > 0.0)) {
    problems.push_back("rope scaling factor must be > 0");
  }
  if (s.rope.scaling == RopeScalingType::kYarn &&
      (!(s.rope.theta > 1.0) || !(s.rope.yarn_beta_fast > 0.0) || !(s.rope.yarn_beta_slow > 0.0))) {
    problems.push_back("YaRN needs rope theta > 1 and beta_fast, beta_slow > 0");
  }
  if (!(s.rms_norm_eps > 0.0) || s.rms_norm_eps >= 1.0) {
    problems.push_back("rms_norm_eps (" + std::to_string(s.rms_norm_eps) + ") outside (0, 1)");
  }
  if (s.bos_token_id && *s.bos_token_id >= s.vocab_size) {
    problems.push_back("bos_token_id (" + num(*s.bos_token_id) + ") >= vocab_size (" +
                       num(s.vocab_size) + ")");
  }
  if (s.eos_token_id && *s.eos_token_id >= s.vocab_size) {
    problems.push_back("eos_token_id (" + num(*s.eos_token_id) + ") >= vocab_size (" +
                       num(s.vocab_size) + ")");
  }
  if (s.moe_layers.size() != s.n_layers) {
    problems.push_back("moe_layers lists " + num(s.moe_layers.size()) + " layers, n_layers is " +
                       num(s.n_layers));
  } else if (s.n_layers != 0 && s.n_moe_layers() == 0) {
    problems.push_back("no layer is an MoE layer");
  }
  if (s.n_moe_layers() < s.moe_layers.size() && s.dense_ffn_size == 0) {
    problems.push_back("dense layers present but dense_ffn_size is 0");
  }
  if (!s.swa_layers.empty() && s.swa_layers.size() != s.n_layers) {
    problems.push_back("swa_layers lists " + num(s.swa_layers.size()) + " layers, n_layers is " +
                       num(s.n_layers));
  }
  bool any_windowed = false;
  for (bool w : s.swa_layers) any_windowed = any_windowed || w;
  if (any_windowed && s.sliding_window == 0) {
    problems.push_back("sliding-window layers present but the window is 0");
  }
  if (s.attention == AttentionKind::kMla) check_mla(s, problems);
  if (s.n_expert_groups > 1) {
    if (s.expert_group_score_top != 1 && s.expert_group_score_top != 2) {
      problems.push_back("an expert group's score must sum its 1 or 2 best experts, not " +
                         num(s.expert_group_score_top));
    }
    if (s.n_experts % s.n_expert_groups != 0) {
      problems.push_back("n_experts (" + num(s.n_experts) + ") is not a multiple of the " +
                         num(s.n_expert_groups) + " expert groups");
    } else if (s.n_experts / s.n_expert_groups < 2) {
      problems.push_back("expert groups of fewer than 2 experts (group scores sum the best 2)");
    }
    if (s.n_expert_groups_used == 0 || s.n_expert_groups_used > s.n_expert_groups) {
      problems.push_back("expert groups used (" + num(s.n_expert_groups_used) + ") must be in 1.." +
                         num(s.n_expert_groups));
    } else if (s.n_experts % s.n_expert_groups == 0 &&
               s.n_expert_groups_used * (s.n_experts / s.n_expert_groups) < s.n_experts_used) {
      problems.push_back("the " + num(s.n_expert_groups_used) + " groups used hold fewer than " +
                         "n_experts_used (" + num(s.n_experts_used) + ") experts");
    }
  }
  if (s.n_shared_experts > 0 && s.shared_expert_ffn_size == 0) {
    problems.push_back("shared experts present but shared_expert_ffn_size is 0");
  }
}

Status validate_spec(const ModelSpec& spec) {
  std::vector<std::string> problems;
  check_spec(spec, problems);
  if (problems.empty()) return Status();
  std::string message = "inconsistent model hyper-parameters:";
  for (const std::string& p : problems) message += "\n  " + p;
  return invalid_argument_error(std::move(message));
}

}  // namespace tandem::model
