// spec_from_gguf: reading <arch>.* and tokenizer.ggml.* metadata into a ModelSpec.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "engine/model/architecture_spec.h"

namespace tandem::model {

namespace {

// Collects every missing / mistyped key instead of stopping at the first.
class KeyReader {
 public:
  explicit KeyReader(const GgufFile& file) : file_(file) {}

  uint64_t required_u64(const std::string& key) {
    Result<uint64_t> v = file_.get_u64(key);
    if (!v.ok()) {
      problems_.push_back(v.status().code() == StatusCode::kNotFound ? "missing key " + key
                                                                     : v.status().message());
      return 0;
    }
    return *v;
  }

  std::optional<uint64_t> optional_u64(const std::string& key) {
    if (!file_.contains(key)) return std::nullopt;
    Result<uint64_t> v = file_.get_u64(key);
    if (!v.ok()) {
      problems_.push_back(v.status().message());
      return std::nullopt;
    }
    return *v;
  }

  std::optional<double> optional_f64(const std::string& key) {
    if (!file_.contains(key)) return std::nullopt;
    Result<double> v = file_.get_f64(key);
    if (!v.ok()) {
      problems_.push_back(v.status().message());
      return std::nullopt;
    }
    return *v;
  }

  double required_f64(const std::string& key) {
    std::optional<double> v = optional_f64(key);
    if (!v && !file_.contains(key)) problems_.push_back("missing key " + key);
    return v.value_or(0.0);
  }

  std::optional<std::string> optional_string(const std::string& key) {
    if (!file_.contains(key)) return std::nullopt;
    Result<std::string_view> v = file_.get_string(key);
    if (!v.ok()) {
      problems_.push_back(v.status().message());
      return std::nullopt;
    }
    return std::string(*v);
  }

  std::optional<bool> optional_bool(const std::string& key) {
    if (!file_.contains(key)) return std::nullopt;
    Result<bool> v = file_.get_bool(key);
    if (!v.ok()) {
      problems_.push_back(v.status().message());
      return std::nullopt;
    }
    return *v;
  }

  void problem(std::string p) { problems_.push_back(std::move(p)); }

  Status status() const {
    if (problems_.empty()) return Status();
    std::string message = file_.name() + ": bad model metadata:";
    for (const std::string& p : problems_) message += "\n  " + p;
    return invalid_argument_error(std::move(message));
  }

 private:
  const GgufFile& file_;
  std::vector<std::string> problems_;
};

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

// llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE values.
constexpr uint64_t kGatingSoftmax = 1;
constexpr uint64_t kGatingSigmoid = 2;

// deepseek2: MLA sizes, the router, the shared expert, DeepSeek's YaRN attention factor
// (llama.cpp's load_arch_hparams and graph for deepseek2; shared/data/tiny-deepseek2/README.md).
//  - Layout: key_length_mla + value_length_mla present = split attn_k_b / attn_v_b, one KV head,
//    key_length = kv_lora + rope; absent = legacy attn_kv_b, key/value_length the head sizes.
//  - No expert_gating_func: softmax (DeepSeek-V2 files), except GLM-4.7-Lite (47/48 layers,
//    vocab 154880: sigmoid), as llama.cpp guesses.
//  - rope.scaling.yarn_log_multiplier holds 0.1 x mscale_all_dim.
void read_deepseek2(const GgufFile& file, const std::string& p, KeyReader& keys, ModelSpec& s) {
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
  // Whatever head_count_kv says (1 in the MLA layout, n_heads in the legacy one): one latent row.
  s.n_kv_heads = 1;
  s.head_dim = m.cache_row();
  s.head_dim_explicit = true;
  s.rope.n_dims = m.qk_rope_dim;
  s.rope.type = RopeType::kNormal;  // GGUF deepseek2 is LLAMA_ROPE_TYPE_NORM

  s.n_expert_groups = keys.optional_u64(p + "expert_group_count").value_or(0);
  s.n_expert_groups_used = keys.optional_u64(p + "expert_group_used_count").value_or(0);
  s.expert_weights_scale = keys.optional_f64(p + "expert_weights_scale").value_or(0.0);
  if (s.expert_weights_scale == 0.0) s.expert_weights_scale = 1.0;  // llama.cpp skips 0 and 1
  std::optional<uint64_t> gating = keys.optional_u64(p + "expert_gating_func");
  if (!gating || *gating == 0) {
    const bool glm47_lite = (s.n_layers == 47 || s.n_layers == 48) && s.vocab_size == 154880;
    gating = glm47_lite ? kGatingSigmoid : kGatingSoftmax;
  }
  if (*gating == kGatingSoftmax) {
    s.routing = RoutingPolicy::kSoftmaxTopK;
  } else if (*gating == kGatingSigmoid) {
    s.routing = RoutingPolicy::kSigmoidTopK;
  } else {
    keys.problem(p + "expert_gating_func " + std::to_string(*gating) +
                 " is not supported for deepseek2 (1 = softmax, 2 = sigmoid)");
  }
  s.router_selection_bias =
      file.find_tensor("blk." + std::to_string(s.n_layers - 1) + ".exp_probs_b.bias") != nullptr;
  s.n_shared_experts = keys.required_u64(p + "expert_shared_count");
  s.shared_expert_ffn_size = s.expert_ffn_size * s.n_shared_experts;
  s.shared_expert_gate = false;

  // The softmax scale (llama.cpp's kq_scale, float arithmetic as there): with YaRN,
  // mscale = 1 + 0.1 mscale_all_dim ln(factor), or 1 + 0.1 ln(factor) without the key.
  float mscale = 1.0f;
  if (s.rope.scaling == RopeScalingType::kYarn && s.rope.scaling_factor > 1.0) {
    const float log_factor = std::log(static_cast<float>(s.rope.scaling_factor));
    if (std::optional<double> mul = keys.optional_f64(p + "rope.scaling.yarn_log_multiplier")) {
      s.rope.yarn_mscale_all_dim = static_cast<float>(*mul) / 0.1f;
    }
    const float all_dim = static_cast<float>(s.rope.yarn_mscale_all_dim);
    mscale = all_dim != 0.0f ? 1.0f + 0.1f * all_dim * log_factor : 1.0f + 0.1f * log_factor;
  }
  s.attn_scale = mscale * mscale / std::sqrt(static_cast<float>(m.q_head_dim()));
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

  s.rope.type = arch == Architecture::kMixtral ? RopeType::kNormal : RopeType::kNeox;
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
  if (tr.recipe.shared_expert == SharedExpertKind::kSigmoidGated) {
    s.n_shared_experts = keys.optional_u64(p + "expert_shared_count").value_or(1);
    s.shared_expert_ffn_size = keys.required_u64(p + "expert_shared_feed_forward_length");
    s.shared_expert_gate = true;
  }
  apply_recipe(tr.recipe, s);
  if (tr.recipe.sliding_window) read_sliding_window(file, p, keys, s);
  if (tr.recipe.qkv_bias && arch == Architecture::kGptOss) {
    // llama.cpp loads gpt-oss q/k/v biases as optional: a file without them runs without them.
    s.attn_qkv_bias = file.find_tensor("blk.0.attn_q.bias") != nullptr;
  }

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
  if (arch == Architecture::kDeepseek2) read_deepseek2(file, p, keys, s);
  TANDEM_RETURN_IF_ERROR(keys.status());
  return s;
}

}  // namespace tandem::model
