// spec_from_gguf: reading <arch>.* and tokenizer.ggml.* metadata into a ModelSpec.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "engine/model/architecture_spec.h"
#include "engine/model/archs/archs.h"
#include "engine/model/spec_readers.h"

namespace tandem::model {

namespace {

RopeScalingType scaling_from_name(std::string_view name, bool* known) {
  *known = true;
  if (name == "none") return RopeScalingType::kNone;
  if (name == "linear") return RopeScalingType::kLinear;
  if (name == "yarn") return RopeScalingType::kYarn;
  if (name == "longrope") return RopeScalingType::kLongRope;
  *known = false;
  return RopeScalingType::kNone;
}

// <arch>.attention.sliding_window (required) and which layers use it: the
// attention.sliding_window_pattern key as a per-layer bool array, or as a period n (layer i is
// windowed unless i % n == n - 1; n = 0: every layer), or llama.cpp's default period 2 (even
// layers windowed) when absent.
void read_sliding_window(const GgufFile& file, const std::string& p, KeyReader& keys,
                         ModelSpec& s) {
  s.sliding_window = keys.required_u64(p + "attention.sliding_window");
  const size_t n = static_cast<size_t>(std::min(s.n_layers, kMaxLayers + 1));
  s.swa_layers.assign(n, false);
  const std::string key = p + "attention.sliding_window_pattern";
  const GgufValue* pattern = file.find(key);
  if (pattern != nullptr && pattern->is_array()) {
    Result<std::vector<bool>> flags = pattern->to_bool_array();
    if (!flags.ok()) {
      keys.problem(flags.status().message());
    } else if (flags->size() != n) {
      keys.problem(key + " lists " + std::to_string(flags->size()) + " layers, block_count is " +
                   std::to_string(s.n_layers));
    } else {
      for (size_t i = 0; i < n; ++i) s.swa_layers[i] = (*flags)[i];
    }
    return;
  }
  const uint64_t period = keys.optional_u64(key).value_or(2);
  for (size_t i = 0; i < n; ++i) s.swa_layers[i] = period == 0 || i % period < period - 1;
}

}  // namespace

Result<ModelSpec> spec_from_gguf(const GgufFile& file) {
  if (!file.contains("general.architecture")) {
    return unsupported_architecture_error("(none: general.architecture is absent)");
  }
  TANDEM_ASSIGN_OR_RETURN(std::string_view gguf_arch, file.get_string("general.architecture"));
  const std::string p = std::string(gguf_arch) + ".";
  TANDEM_ASSIGN_OR_RETURN(uint64_t expert_count, file.get_u32_or(p + "expert_count", 0));
  TANDEM_ASSIGN_OR_RETURN(Architecture arch, architecture_from_gguf(gguf_arch, expert_count));
  const ArchitectureTraits& tr = traits(arch);

  KeyReader keys(file);
  ModelSpec s;
  s.architecture = arch;
  s.name = keys.optional_string("general.name").value_or("");
  s.n_layers = keys.required_u64(p + "block_count");
  // Multi-token-prediction layers follow the trunk in block_count (GLM-4.5, DeepSeek files that
  // keep them): Tandem does not run them; their tensors are listed as unused.
  if (std::optional<uint64_t> nextn = keys.optional_u64(p + "nextn_predict_layers")) {
    if (*nextn >= s.n_layers) {
      keys.problem(p + "nextn_predict_layers (" + std::to_string(*nextn) +
                   ") leaves no layer of block_count (" + std::to_string(s.n_layers) + ")");
    } else if (*nextn > 0) {
      s.n_layers -= *nextn;
      spdlog::info("{}: skipping {} multi-token-prediction layer(s) after layer {}", file.name(),
                   *nextn, s.n_layers - 1);
    }
  }
  s.context_length = keys.required_u64(p + "context_length");
  s.hidden_size = keys.required_u64(p + "embedding_length");
  s.n_heads = keys.required_u64(p + "attention.head_count");
  s.n_kv_heads = keys.optional_u64(p + "attention.head_count_kv").value_or(s.n_heads);
  if (std::optional<uint64_t> kl = keys.optional_u64(p + "attention.key_length")) {
    s.head_dim = *kl;
    s.head_dim_explicit = true;
    std::optional<uint64_t> vl = keys.optional_u64(p + "attention.value_length");
    if (vl && *vl != *kl && tr.recipe.attention != AttentionKind::kMla) {
      keys.problem(p + "attention.value_length (" + std::to_string(*vl) + ") != key_length (" +
                   std::to_string(*kl) + ") is not supported");
    }
  } else if (s.n_heads != 0) {
    s.head_dim = s.hidden_size / s.n_heads;
  }
  s.rms_norm_eps = keys.required_f64(p + "attention.layer_norm_rms_epsilon");

  s.rope.type = RopeType::kNeox;  // an architecture's reader may say NORM (Mixtral, deepseek2)
  s.rope.theta = keys.optional_f64(p + "rope.freq_base").value_or(10000.0);
  s.rope.n_dims = keys.optional_u64(p + "rope.dimension_count").value_or(s.head_dim);
  if (std::optional<std::string> type = keys.optional_string(p + "rope.scaling.type")) {
    bool known = false;
    s.rope.scaling = scaling_from_name(*type, &known);
    if (!known) keys.problem(p + "rope.scaling.type \"" + *type + "\" is not supported");
  }
  if (std::optional<double> factor = keys.optional_f64(p + "rope.scaling.factor")) {
    s.rope.scaling_factor = *factor;
  } else if (std::optional<double> linear = keys.optional_f64(p + "rope.scale_linear")) {
    s.rope.scaling = RopeScalingType::kLinear;  // the key older converters wrote
    s.rope.scaling_factor = *linear;
  }
  if (s.rope.scaling != RopeScalingType::kNone && s.rope.scaling_factor == 1.0) {
    s.rope.scaling = RopeScalingType::kNone;  // factor 1 changes nothing
  }
  s.rope.original_context_length =
      keys.optional_u64(p + "rope.scaling.original_context_length").value_or(0);
  // llama.cpp reads neither rope.scaling.yarn_beta_fast nor _slow (it uses 32 and 1): follow it.
  s.rope.theta_swa = keys.optional_f64(p + "rope.freq_base_swa").value_or(0.0);

  s.n_experts = expert_count;
  s.n_experts_used = keys.required_u64(p + "expert_used_count");
  const std::optional<uint64_t> ffn = keys.optional_u64(p + "feed_forward_length");
  if (std::optional<uint64_t> eff = keys.optional_u64(p + "expert_feed_forward_length")) {
    s.expert_ffn_size = *eff;
  } else if (ffn) {
    s.expert_ffn_size = *ffn;  // Mixtral / OLMoE converters write the expert size here
  } else {
    keys.problem("missing key " + p + "expert_feed_forward_length");
  }
  s.norm_topk_prob =
      keys.optional_bool(p + "expert_weights_norm").value_or(tr.recipe.default_norm_topk_prob);
  const uint64_t leading_dense = keys.optional_u64(p + "leading_dense_block_count").value_or(0);
  // Absurd layer counts are reported by check_spec; no table of that size is allocated.
  s.moe_layers.assign(std::min(s.n_layers, kMaxLayers + 1), true);
  for (uint64_t i = 0; i < leading_dense && i < s.moe_layers.size(); ++i) s.moe_layers[i] = false;
  if (leading_dense > 0) s.dense_ffn_size = ffn.value_or(0);
  apply_recipe(tr.recipe, s);
  if (tr.recipe.sliding_window) read_sliding_window(file, p, keys, s);

  if (const GgufValue* tokens = file.find("tokenizer.ggml.tokens")) {
    s.vocab_size = tokens->array_size();
  } else if (std::optional<uint64_t> v = keys.optional_u64(p + "vocab_size")) {
    s.vocab_size = *v;
  } else if (const TensorInfo* embd = file.find_tensor("token_embd.weight");
             embd != nullptr && !embd->shape.empty()) {
    s.vocab_size = embd->shape[0];
  }
  s.bos_token_id = keys.optional_u64("tokenizer.ggml.bos_token_id");
  s.eos_token_id = keys.optional_u64("tokenizer.ggml.eos_token_id");
  s.tied_embeddings = file.find_tensor("output.weight") == nullptr;
  if (tr.spec_readers->gguf != nullptr) tr.spec_readers->gguf(file, p, keys, s);
  TANDEM_RETURN_IF_ERROR(keys.status());
  return s;
}

}  // namespace tandem::model
