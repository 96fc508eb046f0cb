// ModelSpec: the format-independent hyper-parameters of a supported MoE architecture.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/model/architecture.h"

namespace tandem::model {

// How RoPE pairs the dimensions of a head. kNormal: adjacent pairs (2i, 2i+1) (GGUF "llama",
// whose converter permutes Q/K rows); kNeox: halves (i, i + d/2), i.e. HF's rotate_half. Every
// HF checkpoint uses kNeox; GGUF uses kNeox for qwen2moe, qwen3moe and olmoe.
enum class RopeType { kNormal, kNeox };

// RoPE context-extension schemes as HF's rope_scaling / GGUF's rope.scaling.type name them.
enum class RopeScalingType { kNone, kLinear, kDynamic, kYarn, kLongRope, kLlama3 };

std::string_view rope_type_name(RopeType type);                 // "normal", "neox"
std::string_view rope_scaling_type_name(RopeScalingType type);  // "none", "linear", "yarn", ...

struct RopeSpec {
  RopeType type = RopeType::kNeox;
  double theta = 10000.0;  // base frequency
  uint64_t n_dims = 0;     // rotated dimensions per head (= head_dim unless the file says less)
  RopeScalingType scaling = RopeScalingType::kNone;
  double scaling_factor = 1.0;           // meaningful when scaling != kNone
  uint64_t original_context_length = 0;  // 0 when the file does not say
  // YaRN's correction range (HF rope_scaling beta_fast / beta_slow; GGUF files carry keys for
  // them, which llama.cpp ignores: 32 and 1 as there).
  double yarn_beta_fast = 32.0;
  double yarn_beta_slow = 1.0;
  // Whether YaRN's correction range is rounded to whole dimensions (HF rope_scaling "truncate",
  // default true; gpt-oss's config.json says false). GGUF has no key: llama.cpp always rounds.
  bool yarn_truncate = true;
  // Base frequency of sliding-window layers (GGUF rope.freq_base_swa); 0 = theta.
  double theta_swa = 0.0;
  // DeepSeek's YaRN attention factor (HF rope_scaling mscale_all_dim; GGUF
  // rope.scaling.yarn_log_multiplier, stored as 0.1 x it): with YaRN, the softmax scale is
  // multiplied by (1 + 0.1 mscale_all_dim ln(factor))^2 and cos/sin are not scaled. 0 = none.
  double yarn_mscale_all_dim = 0.0;
};

// Multi-head latent attention (AttentionKind::kMla) sizes. The cache row of a token is
// [kv_lora_rank latent values | qk_rope_dim RoPE key values], shared by every head; the values are
// its first kv_lora_rank entries. Each head's query is [qk_nope_dim | qk_rope_dim]; its no-RoPE
// part is mapped into the latent space by k_b, its output mapped back out by v_b (v_head_dim).
struct MlaSpec {
  uint64_t q_lora_rank = 0;  // 0: q comes from one projection (the "lite" models)
  uint64_t kv_lora_rank = 0;
  uint64_t qk_nope_dim = 0;
  uint64_t qk_rope_dim = 0;
  uint64_t v_head_dim = 0;
  // The file's layout: attn_k_b + attn_v_b (split; current converters), or one attn_kv_b
  // (legacy GGUF, HF kv_b_proj), which the runner splits and transposes once at load.
  bool split_kv_b = true;
  uint64_t q_head_dim() const { return qk_nope_dim + qk_rope_dim; }
  uint64_t cache_row() const { return kv_lora_rank + qk_rope_dim; }
};

// Bounds applied while reading a spec, so that absurd metadata cannot make us allocate per-layer or
// per-expert tables of absurd size. Far above any published model.
inline constexpr uint64_t kMaxLayers = 4096;
inline constexpr uint64_t kMaxExperts = 65536;

// Everything the forward pass needs to know about a model's shape. Built once by the checkpoint
// opener (from GGUF metadata or config.json); immutable afterwards, so any thread may read it.
struct ModelSpec {
  Architecture architecture = Architecture::kQwen3Moe;
  std::string name;  // general.name / _name_or_path when known; informational only

  uint64_t n_layers = 0;
  uint64_t hidden_size = 0;
  uint64_t n_heads = 0;
  uint64_t n_kv_heads = 0;
  uint64_t head_dim = 0;
  bool head_dim_explicit = false;  // the file gave head_dim (key_length / head_dim) itself
  RopeSpec rope;
  double rms_norm_eps = 1e-6;
  uint64_t vocab_size = 0;
  uint64_t context_length = 0;

  // Attention details.
  AttentionKind attention = AttentionKind::kGqa;
  MlaSpec mla;  // kMla only
  // The softmax scale of attention scores; 0 = 1 / sqrt(head_dim).
  double attn_scale = 0.0;
  bool attn_qkv_bias = false;  // q/k/v projections carry biases (Qwen2-MoE, GPT-OSS)
  bool attn_out_bias = false;  // the output projection carries a bias (GPT-OSS)
  bool attn_sinks = false;     // one sink logit per query head joins the softmax (GPT-OSS)
  QkNorm qk_norm = QkNorm::kNone;
  // Sliding-window attention: swa_layers[i] (n_layers entries, or empty when no layer is
  // windowed) marks a layer whose query at position t sees keys t - sliding_window + 1 .. t.
  uint64_t sliding_window = 0;
  std::vector<bool> swa_layers;

  // MoE.
  uint64_t n_experts = 0;
  uint64_t n_experts_used = 0;   // top-k
  uint64_t expert_ffn_size = 0;  // moe_intermediate_size
  // true: the top-k routing weights are divided by their sum (Qwen3-MoE per config, Mixtral by
  // construction); false: the softmax probabilities are used as they are (OLMoE, Qwen2-MoE
  // default).
  bool norm_topk_prob = false;
  RoutingPolicy routing = RoutingPolicy::kSoftmaxTopK;
  bool router_bias = false;  // the router carries a bias (GPT-OSS)
  // MoE layers carry a selection bias (GGUF exp_probs_b, HF e_score_correction_bias): added to
  // the scores for choosing experts only.
  bool router_selection_bias = false;
  // Group-limited routing (DeepSeek-V2/V3): the experts form n_expert_groups groups of
  // consecutive ids; a token picks among the n_expert_groups_used groups with the highest sum of
  // their expert_group_score_top best selection scores (2: DeepSeek-V3 and llama.cpp; 1, the
  // group's best: DeepSeek-V2's group_limited_greedy). 0 or 1 group: plain top-k.
  uint64_t n_expert_groups = 0;
  uint64_t n_expert_groups_used = 0;
  uint64_t expert_group_score_top = 2;
  // Routing weights are multiplied by this after renormalisation (DeepSeek's
  // routed_scaling_factor); 1 = unscaled.
  double expert_weights_scale = 1.0;
  ExpertActivation expert_activation = ExpertActivation::kSwiGlu;
  bool expert_bias = false;             // expert gate/up/down carry biases (GPT-OSS)
  uint64_t n_shared_experts = 0;        // Qwen2-MoE: 1
  uint64_t shared_expert_ffn_size = 0;  // shared_expert_intermediate_size
  bool shared_expert_gate = false;      // a sigmoid gate scales the shared expert's output
  // Dense FFN size of layers that are not MoE (0 when every layer is MoE).
  uint64_t dense_ffn_size = 0;
  // moe_layers[i]: layer i has a routed-expert FFN; otherwise a dense FFN of dense_ffn_size.
  std::vector<bool> moe_layers;

  // Tokens. Unknown ids stay empty.
  std::optional<uint64_t> bos_token_id;
  std::optional<uint64_t> eos_token_id;
  // The lm head reuses the token embedding (no separate output tensor is expected).
  bool tied_embeddings = false;

  uint64_t n_moe_layers() const;
  // GQA: the widths of q and of one K (or V) row. MLA: head_dim is the cache row
  // (kv_lora_rank + qk_rope_dim) and n_kv_heads 1, so q_dim() is the absorbed query's width and
  // kv_dim() the latent row's.
  uint64_t q_dim() const { return n_heads * head_dim; }
  uint64_t kv_dim() const { return n_kv_heads * head_dim; }
  // Floats of one token's values per layer in the cache: kv_dim(), or 0 for MLA, whose values
  // are the leading kv_lora_rank floats of the key row (nothing stored twice).
  uint64_t kv_value_dim() const { return attention == AttentionKind::kMla ? 0 : kv_dim(); }
  // Width of one token's attention output before the output projection (n_heads x v head).
  uint64_t attn_out_dim() const {
    return attention == AttentionKind::kMla ? n_heads * mla.v_head_dim : q_dim();
  }
  bool windowed(uint64_t layer) const { return layer < swa_layers.size() && swa_layers[layer]; }
  // The attention window of `layer`: sliding_window for a windowed layer, 0 (all) otherwise.
  uint64_t attention_window(uint64_t layer) const { return windowed(layer) ? sliding_window : 0; }
};

// Copies an architecture's LayerRecipe into the spec's attention / routing / expert fields.
void apply_recipe(const LayerRecipe& recipe, ModelSpec& spec);

// Appends one line per inconsistency among the hyper-parameters (zero sizes, n_experts_used >
// n_experts, n_heads % n_kv_heads != 0, hidden != n_heads * head_dim when head_dim was derived,
// bos/eos >= vocab, moe_layers size, missing expert sizes, n_layers > kMaxLayers, n_experts >
// kMaxExperts, swa_layers size, windowed layers without a window). Pure; callable from any thread.
void check_spec(const ModelSpec& spec, std::vector<std::string>& problems);

// check_spec as a Status: OK, or INVALID_ARGUMENT listing every problem on its own line.
Status validate_spec(const ModelSpec& spec);

}  // namespace tandem::model
