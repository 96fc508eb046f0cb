// spec_from_hf_config: reading a transformers config.json into a ModelSpec.
#include <algorithm>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/model/architecture_spec.h"
#include "engine/model/archs/archs.h"
#include "engine/model/spec_readers.h"

namespace tandem::model {

namespace {

RopeScalingType scaling_from_hf(const std::string& name, bool* known) {
  *known = true;
  if (name.empty() || name == "default") return RopeScalingType::kNone;
  if (name == "linear") return RopeScalingType::kLinear;
  if (name == "dynamic") return RopeScalingType::kDynamic;
  if (name == "yarn") return RopeScalingType::kYarn;
  if (name == "longrope") return RopeScalingType::kLongRope;
  if (name == "llama3") return RopeScalingType::kLlama3;
  *known = false;
  return RopeScalingType::kNone;
}

}  // namespace

// rope_theta at the top level (transformers 4.x) or inside rope_parameters (5.x); scaling in
// rope_scaling (4.x, key "type" or "rope_type") or rope_parameters (5.x). `context_length` is
// max_position_embeddings: YaRN without a factor uses max_position_embeddings / original (as
// transformers' _compute_yarn_parameters does).
void read_rope(FieldReader& f, double default_theta, uint64_t context_length, RopeSpec& rope) {
  const json& c = f.config();
  rope.type = RopeType::kNeox;
  rope.theta = f.optional_f64("rope_theta").value_or(default_theta);
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    const json* obj = f.find(c, key);
    if (obj == nullptr) continue;
    if (!obj->is_object()) {
      f.problem(std::string(key) + " must be an object");
      continue;
    }
    if (std::optional<double> theta = f.optional_f64("rope_theta", obj)) rope.theta = *theta;
    std::string type = f.optional_string("rope_type", obj);
    if (type.empty()) type = f.optional_string("type", obj);
    bool known = false;
    RopeScalingType scaling = scaling_from_hf(type, &known);
    if (!known) f.problem(std::string(key) + ": rope type \"" + type + "\" is not supported");
    if (scaling != RopeScalingType::kNone) {
      rope.scaling = scaling;
      rope.original_context_length =
          f.optional_u64("original_max_position_embeddings", obj).value_or(0);
      const std::optional<double> factor = f.optional_f64("factor", obj);
      rope.scaling_factor = factor.value_or(1.0);
      if (!factor && scaling == RopeScalingType::kYarn && rope.original_context_length != 0) {
        rope.scaling_factor =
            static_cast<double>(context_length) / static_cast<double>(rope.original_context_length);
      }
      // transformers reads `beta or default`: 0 means the default too.
      const double beta_fast = f.optional_f64("beta_fast", obj).value_or(0.0);
      const double beta_slow = f.optional_f64("beta_slow", obj).value_or(0.0);
      rope.yarn_beta_fast = beta_fast != 0.0 ? beta_fast : 32.0;
      rope.yarn_beta_slow = beta_slow != 0.0 ? beta_slow : 1.0;
      // truncate = false keeps YaRN's correction range fractional (gpt-oss).
      rope.yarn_truncate = f.optional_bool("truncate", obj).value_or(true);
      // mscale and mscale_all_dim both given and equal (DeepSeek-V2/V3, Kimi-K2): cos/sin are
      // unscaled (transformers' attention factor is their get_mscale ratio, 1) and MLA's softmax
      // scale takes mscale_all_dim. Other combinations, and attention_factor, change the
      // attention factor in ways the kernels do not compute.
      const std::optional<double> mscale = f.optional_f64("mscale", obj);
      const std::optional<double> all_dim = f.optional_f64("mscale_all_dim", obj);
      if (mscale && all_dim && *mscale == *all_dim && *all_dim != 0.0) {
        rope.yarn_mscale_all_dim = *all_dim;
      } else if (mscale || all_dim) {
        f.problem(
            std::string(key) +
            ": YaRN mscale / mscale_all_dim are supported only when both are given and equal");
      }
      if (f.find(*obj, "attention_factor") != nullptr) {
        f.problem(std::string(key) + ": YaRN attention_factor is not supported");
      }
    }
  }
}

Result<ModelSpec> spec_from_hf_config(const json& config, std::string_view source) {
  if (!config.is_object()) {
    return invalid_argument_error(std::string(source) + ": not a JSON object");
  }
  FieldReader f(config, source);
  std::string model_type = f.optional_string("model_type");
  std::string hf_class;
  if (const json* archs = f.find(config, "architectures");
      archs != nullptr && archs->is_array() && !archs->empty() && (*archs)[0].is_string()) {
    hf_class = (*archs)[0].get<std::string>();
  }
  TANDEM_ASSIGN_OR_RETURN(Architecture arch, architecture_from_hf(model_type, hf_class));
  const ArchitectureTraits& tr = traits(arch);
  const SpecReaders& readers = *tr.spec_readers;

  ModelSpec s;
  s.architecture = arch;
  s.name = f.optional_string("_name_or_path");
  s.n_layers = f.required_u64("num_hidden_layers");
  s.hidden_size = f.required_u64("hidden_size");
  s.n_heads = f.required_u64("num_attention_heads");
  s.n_kv_heads = f.optional_u64("num_key_value_heads").value_or(s.n_heads);
  if (std::optional<uint64_t> hd = f.optional_u64("head_dim")) {
    s.head_dim = *hd;
    s.head_dim_explicit = true;
  } else if (s.n_heads != 0) {
    s.head_dim = s.hidden_size / s.n_heads;
  }
  s.rms_norm_eps = f.optional_f64("rms_norm_eps").value_or(readers.hf_rms_norm_eps);
  s.vocab_size = f.required_u64("vocab_size");
  s.context_length = f.required_u64("max_position_embeddings");
  if (readers.hf_default_rope != nullptr && f.find(config, "rope_parameters") == nullptr &&
      f.find(config, "rope_scaling") == nullptr) {
    readers.hf_default_rope(s.rope);
  }
  read_rope(f, readers.hf_rope_theta, s.context_length, s.rope);
  s.rope.n_dims = s.head_dim;
  // Partial RoPE (GLM-4.5, MiniMax-M2): the leading head_dim x factor dimensions rotate;
  // top-level (4.x configs) or in rope_parameters (transformers 5).
  std::optional<double> partial = f.optional_f64("partial_rotary_factor");
  if (const json* rp = f.find(config, "rope_parameters"); rp != nullptr && rp->is_object()) {
    if (std::optional<double> in_rope = f.optional_f64("partial_rotary_factor", rp)) {
      partial = in_rope;
    }
  }
  if (partial && !(*partial > 0.0 && *partial <= 1.0)) {
    f.problem("partial_rotary_factor must be in (0, 1], got " + json(*partial).dump());
  } else if (partial) {
    s.rope.n_dims = static_cast<uint64_t>(static_cast<double>(s.head_dim) * *partial);
  }
  s.tied_embeddings = f.optional_bool("tie_word_embeddings").value_or(false);
  s.bos_token_id = f.token_id("bos_token_id");
  s.eos_token_id = f.token_id("eos_token_id");
  apply_recipe(tr.recipe, s);
  s.attn_qkv_bias = false;  // the architecture's reader decides (qkv_bias, attention_bias)

  if (f.optional_bool("use_sliding_window").value_or(false)) {
    f.problem("use_sliding_window = true is not supported");
  }
  // Absurd layer counts are reported by check_spec; no table of that size is allocated.
  s.moe_layers.assign(std::min(s.n_layers, kMaxLayers + 1), true);
  readers.hf(f, s);
  TANDEM_RETURN_IF_ERROR(f.status());
  return s;
}

void read_routed_experts_hf(FieldReader& f, const std::string& ffn_field, ModelSpec& s) {
  s.n_experts = f.expert_count();
  s.n_experts_used = f.required_u64("num_experts_per_tok");
  s.expert_ffn_size = f.required_u64(ffn_field);
}

}  // namespace tandem::model
