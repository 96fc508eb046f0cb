// spec_from_hf_config: reading a transformers config.json into a ModelSpec.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

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

// transformers' rope_theta default per architecture (the config classes' default_theta).
double default_rope_theta(Architecture arch) {
  switch (arch) {
    case Architecture::kMixtral:
      return 1e6;
    case Architecture::kGptOss:
      return 150000.0;
    default:
      return 1e4;
  }
}

// GptOssConfig's rope_parameters when config.json has neither rope_parameters nor rope_scaling:
// YaRN, factor 32, beta 32 / 1, truncate false, original context 4096.
void set_gpt_oss_default_rope(RopeSpec& rope) {
  rope.scaling = RopeScalingType::kYarn;
  rope.scaling_factor = 32.0;
  rope.original_context_length = 4096;
  rope.yarn_beta_fast = 32.0;
  rope.yarn_beta_slow = 1.0;
  rope.yarn_truncate = false;
}

// GptOssForCausalLM (transformers' configuration_gpt_oss.py / modeling_gpt_oss.py): experts,
// top-k, expert FFN, the per-layer attention kind, attention biases, and the fixed constants of
// the clamped SwiGLU. The expert tensors themselves are repacked at open (gpt_oss_hf_experts.h).
void read_gpt_oss(FieldReader& f, ModelSpec& s) {
  const json& c = f.config();
  s.n_experts = f.expert_count();
  // num_experts_per_tok (transformers) or experts_per_token (OpenAI's own key, which
  // gpt-oss's config.json carries too).
  const std::optional<uint64_t> per_tok = f.optional_u64("num_experts_per_tok");
  const std::optional<uint64_t> per_token = f.optional_u64("experts_per_token");
  if (per_tok && per_token && *per_tok != *per_token) {
    f.problem("num_experts_per_tok (" + std::to_string(*per_tok) + ") != experts_per_token (" +
              std::to_string(*per_token) + ")");
  }
  if (!per_tok && !per_token && f.find(c, "num_experts_per_tok") == nullptr &&
      f.find(c, "experts_per_token") == nullptr) {
    f.problem("missing field num_experts_per_tok (or experts_per_token)");
  }
  s.n_experts_used = per_tok.value_or(per_token.value_or(0));
  s.expert_ffn_size = f.required_u64("intermediate_size");
  if (!s.head_dim_explicit) f.problem("missing field head_dim");
  s.norm_topk_prob = false;  // softmax over the k selected logits: already normalised
  const bool bias = f.optional_bool("attention_bias").value_or(true);
  s.attn_qkv_bias = bias;
  s.attn_out_bias = bias;

  // The expert activation's constants are fixed in the kernels (kSwiGluOai).
  const double limit = f.optional_f64("swiglu_limit").value_or(7.0);
  if (limit != 7.0) {
    f.problem("swiglu_limit = " + json(limit).dump() +
              " is not supported (the clamped SwiGLU's limit is fixed at 7.0)");
  }
  const double alpha = f.optional_f64("swiglu_alpha").value_or(1.702);
  if (alpha != 1.702) {
    f.problem("swiglu_alpha = " + json(alpha).dump() +
              " is not supported (the clamped SwiGLU's sigmoid gain is fixed at 1.702)");
  }
  if (const json* q = f.find(c, "quantization_config")) {
    const std::string method = q->is_object() ? f.optional_string("quant_method", q) : "";
    if (method != "mxfp4") {
      f.problem("quantization_config: quant_method " +
                (q->is_object() && q->contains("quant_method") ? (*q)["quant_method"].dump()
                                                               : std::string("(none)")) +
                " is not supported (gpt-oss: mxfp4 or no quantization_config)");
    }
  }

  // Which layers attend over a window: layer_types, else transformers' default (even layers).
  // sliding_window null: no layer is windowed (transformers passes no window then).
  const size_t n = static_cast<size_t>(std::min(s.n_layers, kMaxLayers + 1));
  s.swa_layers.assign(n, false);
  const auto window_it = c.find("sliding_window");
  if (window_it == c.end()) {
    f.problem("missing field sliding_window");
  } else if (!window_it->is_null()) {
    s.sliding_window = f.optional_u64("sliding_window").value_or(0);
  }
  if (const json* types = f.find(c, "layer_types")) {
    if (!types->is_array()) {
      f.problem("layer_types must be a list of \"sliding_attention\" / \"full_attention\"");
    } else if (types->size() != s.n_layers) {
      f.problem("layer_types lists " + std::to_string(types->size()) +
                " layers, num_hidden_layers is " + std::to_string(s.n_layers));
    } else {
      for (size_t i = 0; i < n; ++i) {
        const json& t = (*types)[i];
        if (t == "sliding_attention") {
          s.swa_layers[i] = true;
        } else if (t != "full_attention") {
          f.problem("layer_types[" + std::to_string(i) + "] is " + t.dump() +
                    ", not \"sliding_attention\" or \"full_attention\"");
        }
      }
    }
  } else {
    for (size_t i = 0; i < n; ++i) s.swa_layers[i] = i % 2 == 0;
  }
  if (s.sliding_window == 0) s.swa_layers.assign(n, false);
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
  s.rms_norm_eps =
      f.optional_f64("rms_norm_eps")
          .value_or(arch == Architecture::kQwen3Moe || arch == Architecture::kQwen2Moe ? 1e-6
                                                                                       : 1e-5);
  s.vocab_size = f.required_u64("vocab_size");
  s.context_length = f.required_u64("max_position_embeddings");
  if (arch == Architecture::kGptOss && f.find(config, "rope_parameters") == nullptr &&
      f.find(config, "rope_scaling") == nullptr) {
    set_gpt_oss_default_rope(s.rope);
  }
  read_rope(f, default_rope_theta(arch), s.context_length, s.rope);
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
  s.attn_qkv_bias = false;  // Qwen2-MoE's qkv_bias key decides below

  if (f.optional_bool("use_sliding_window").value_or(false)) {
    f.problem("use_sliding_window = true is not supported");
  }
  // Absurd layer counts are reported by check_spec; no table of that size is allocated.
  s.moe_layers.assign(std::min(s.n_layers, kMaxLayers + 1), true);
  switch (arch) {
    case Architecture::kMixtral:
      s.n_experts = f.expert_count();
      s.n_experts_used = f.required_u64("num_experts_per_tok");
      s.expert_ffn_size = f.required_u64("intermediate_size");
      s.norm_topk_prob = true;  // softmax over the top-k logits
      break;
    case Architecture::kOlmoe:
      s.n_experts = f.expert_count();
      s.n_experts_used = f.required_u64("num_experts_per_tok");
      s.expert_ffn_size = f.required_u64("intermediate_size");
      s.norm_topk_prob = f.optional_bool("norm_topk_prob").value_or(false);
      if (f.optional_f64("clip_qkv")) f.problem("clip_qkv is not supported");
      break;
    case Architecture::kQwen3Moe:
    case Architecture::kQwen2Moe: {
      s.n_experts = f.expert_count();
      s.n_experts_used = f.required_u64("num_experts_per_tok");
      s.expert_ffn_size = f.required_u64("moe_intermediate_size");
      s.norm_topk_prob = f.optional_bool("norm_topk_prob").value_or(false);
      const uint64_t step = f.optional_u64("decoder_sparse_step").value_or(1);
      std::vector<uint64_t> mlp_only;
      if (const json* list = f.find(config, "mlp_only_layers")) {
        if (!list->is_array()) f.problem("mlp_only_layers must be a list of layer indices");
        for (const json& v : list->is_array() ? *list : json::array()) {
          if (!v.is_number_integer() || v.get<int64_t>() < 0) {
            f.problem("mlp_only_layers holds " + v.dump() + ", not a layer index");
            continue;
          }
          mlp_only.push_back(v.get<uint64_t>());
        }
      }
      for (uint64_t i = 0; i < s.moe_layers.size(); ++i) {
        const bool listed = std::find(mlp_only.begin(), mlp_only.end(), i) != mlp_only.end();
        s.moe_layers[i] = !listed && s.n_experts > 0 && step > 0 && (i + 1) % step == 0;
      }
      if (s.n_moe_layers() < s.moe_layers.size())
        s.dense_ffn_size = f.required_u64("intermediate_size");
      if (arch == Architecture::kQwen2Moe) {
        s.attn_qkv_bias = f.optional_bool("qkv_bias").value_or(true);
        s.n_shared_experts = 1;
        s.shared_expert_ffn_size = f.required_u64("shared_expert_intermediate_size");
        s.shared_expert_gate = true;
      } else if (f.optional_bool("attention_bias").value_or(false)) {
        f.problem("attention_bias = true is not supported for qwen3moe");
      }
      break;
    }
    case Architecture::kGptOss:
      read_gpt_oss(f, s);
      break;
    case Architecture::kDeepseek2:
      read_deepseek_v3_hf(f, s);
      break;
    case Architecture::kGlm4Moe:
      read_glm4_moe_hf(f, s);
      break;
    case Architecture::kMinimaxM2:
      read_minimax_m2_hf(f, s);
      break;
  }
  TANDEM_RETURN_IF_ERROR(f.status());
  return s;
}

}  // namespace tandem::model
