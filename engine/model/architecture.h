// Architecture: the MoE architectures Tandem runs, with their names in GGUF and HF and their
// layer recipes (one file per architecture under engine/model/archs/).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/result.h"

namespace tandem::model {

enum class Architecture {
  kQwen3Moe,
  kQwen2Moe,
  kMixtral,
  kOlmoe,
  kGptOss,
  kDeepseek2,
  kGlm4Moe,
  kMinimaxM2,
};

// Where the Q/K RMSNorm weights apply: over each head (Qwen3-MoE, weight [head_dim]) or over the
// whole projection (OLMoE, weight [n_heads * head_dim] / [n_kv_heads * head_dim]).
enum class QkNorm { kNone, kPerHead, kWholeProjection };

// How router logits become the k routing weights of a token.
//  kSoftmaxTopK: p = softmax(all logits), the k largest p (then optionally renormalised):
//                Qwen2/3-MoE, Mixtral, OLMoE.
//  kTopKSoftmax: the k largest raw logits, then softmax over those k only: GPT-OSS
//                (llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT).
//  kSigmoidTopK: p = sigmoid(logits); the k largest p + selection bias (when the layer has one),
//                optionally within the best expert groups; weights are the unbiased p of those
//                k (then optionally renormalised): DeepSeek-V3 / Kimi-K2, GLM-4.5.
enum class RoutingPolicy { kSoftmaxTopK, kTopKSoftmax, kSigmoidTopK };

// How a layer computes attention.
//  kGqa: per-head Q, K, V projections (grouped-query; equal head counts = MHA).
//  kMla: DeepSeek's multi-head latent attention in the absorbed form: a compressed KV row
//        (kv_lora_rank latent values + one shared RoPE key part) is what the cache holds, and
//        each head's query is mapped into the latent space (ModelSpec::mla).
enum class AttentionKind { kGqa, kMla };

// The shared expert next to the routed ones: none, plain (added as it is: DeepSeek), or scaled by
// a sigmoid gate (Qwen2-MoE).
enum class SharedExpertKind { kNone, kPlain, kSigmoidGated };

// The nonlinearity between an expert's gate/up and down projections.
//  kSwiGlu:    silu(gate) * up.
//  kSwiGluOai: GPT-OSS's clamped variant: g = min(gate, 7), u = clamp(up, -7, 7),
//              g * sigmoid(1.702 g) * (u + 1) (constants fixed, as in llama.cpp and HF).
enum class ExpertActivation { kSwiGlu, kSwiGluOai };

// The arithmetic of one architecture's transformer block: what the layer loop does beyond the
// common pre-norm GQA attention + MoE FFN. One per architecture (ArchitectureTraits::recipe); the
// spec readers copy it into the ModelSpec.
struct LayerRecipe {
  AttentionKind attention = AttentionKind::kGqa;
  QkNorm qk_norm = QkNorm::kNone;
  bool qkv_bias = false;       // q/k/v projections have biases (Qwen2-MoE, GPT-OSS)
  bool attn_out_bias = false;  // the output projection has a bias (GPT-OSS)
  bool attn_sinks = false;     // one learned sink logit per head joins the softmax (GPT-OSS)
  // Some layers attend over a sliding window (GPT-OSS: the window and the layer pattern come from
  // the file; llama.cpp's default pattern makes even layers windowed).
  bool sliding_window = false;
  RoutingPolicy routing = RoutingPolicy::kSoftmaxTopK;
  bool router_bias = false;  // the router has a bias (GPT-OSS)
  // The router may carry a selection bias added for choosing experts only (DeepSeek-V3's
  // e_score_correction_bias, GGUF exp_probs_b): optional per file.
  bool selection_bias = false;
  ExpertActivation activation = ExpertActivation::kSwiGlu;
  bool expert_bias = false;  // expert gate/up/down projections have biases (GPT-OSS)
  SharedExpertKind shared_expert = SharedExpertKind::kNone;
  // Top-k renormalisation when the file does not say (GGUF never does for these archs; llama.cpp
  // hard-codes it per arch: true for qwen3moe and llama/Mixtral, false for qwen2moe and olmoe).
  bool default_norm_topk_prob = false;
};

enum class WeightRole;    // engine/model/weight_names.h
struct ModelSpec;         // engine/model/model_spec.h
struct TensorInfo;        // engine/model/tensor_info.h
struct ConvertedTensors;  // engine/model/converted_tensors.h

// One HF tensor name within a layer (what follows "model.layers.N.") and the role it holds.
struct HfSuffix {
  std::string_view suffix;
  WeightRole role;
};

// An architecture's HF (transformers) layer tensor names beyond the common ones every
// architecture shares (weight_names.cpp: the attention and FFN norms, q/k/v/o projections and
// q/k/v biases, Q/K norms, a dense layer's mlp.{gate,up,down}_proj).
struct HfNames {
  // The block holding the router (<moe_prefix>gate.weight) and the routed experts
  // (<moe_prefix>experts.E.<projection>): "mlp." or Mixtral's "block_sparse_moe.".
  std::string_view moe_prefix = "mlp.";
  // A routed expert's gate, up and down projections after "experts.E.".
  std::array<std::string_view, 3> expert_projections = {"gate_proj.weight", "up_proj.weight",
                                                        "down_proj.weight"};
  // The router's selection bias after moe_prefix, as file_tensor_name writes it (on the router,
  // DeepSeek-V3 / GLM-4.5; on the block, MiniMax-M2). canonical_from_hf accepts both places.
  std::string_view selection_bias = "gate.e_score_correction_bias";
  // The shared expert's names (Qwen2-MoE's mlp.shared_expert.*, DeepSeek's mlp.shared_experts.*).
  std::span<const HfSuffix> shared_expert = {};
  // The architecture's other own names (DeepSeek's MLA projections, GPT-OSS's table).
  std::span<const HfSuffix> extra = {};
  // Every mlp.* name is in `extra`: the router / expert convention above and the common dense FFN
  // names do not apply (GPT-OSS).
  bool own_mlp_names = false;
  // For messages: the file tensor a role comes from when the opener derives that role's tensor
  // (GPT-OSS's interleaved experts, gpt_oss_hf_experts.h); looked up before every other name.
  std::span<const HfSuffix> sources = {};
  // The conversion the opener runs on the checkpoint's tensors before binding them, for a layout
  // the kernels do not take as it is (GPT-OSS's interleaved, transposed or MXFP4-split experts,
  // gpt_oss_hf_experts.h): the derived tensors replace their sources. Null for none.
  Result<ConvertedTensors> (*convert)(const ModelSpec& spec,
                                      std::span<const TensorInfo> tensors) = nullptr;
};

// How spec_from_gguf / spec_from_hf_config read one architecture's own keys and fields
// (engine/model/archs/archs.h; opaque outside engine/model).
struct SpecReaders;

// Static facts about one architecture: one constant per architecture, defined in its file
// engine/model/archs/<arch>.cpp; callers get references to it (valid for the whole program, any
// thread).
struct ArchitectureTraits {
  Architecture architecture;
  std::string_view name;           // Tandem's name: "qwen3moe", "qwen2moe", "mixtral", ...
  std::string_view gguf_arch;      // general.architecture ("llama" for Mixtral, "gpt-oss")
  std::string_view hf_model_type;  // config.json model_type
  // Other model_types of checkpoints in this architecture's layout (Kimi-K2's "kimi_k2").
  std::span<const std::string_view> hf_model_type_aliases = {};
  std::string_view hf_class;  // config.json architectures[0]
  LayerRecipe recipe;
  // GGUF name of the pre-FFN norm: "ffn_norm", or "post_attention_norm" (GPT-OSS, GLM-4.5).
  std::string_view gguf_ffn_norm = "ffn_norm";
  HfNames hf = {};
  const SpecReaders* spec_readers = nullptr;  // never null in a listed architecture
};

// "softmax_topk", "topk_softmax", "sigmoid_topk"; "gqa", "mla" (inspect's names).
std::string_view routing_policy_name(RoutingPolicy policy);
std::string_view attention_kind_name(AttentionKind kind);

// Every architecture, in the order of the "supported:" list.
std::span<const ArchitectureTraits* const> architectures();
const ArchitectureTraits& traits(Architecture architecture);
std::string_view architecture_name(Architecture architecture);

// "qwen3moe, qwen2moe, mixtral, olmoe, gpt-oss".
std::string supported_architectures_list();

// UNIMPLEMENTED "architecture X is not supported; supported: qwen3moe, ..., gpt-oss".
Status unsupported_architecture_error(std::string_view name);

// From GGUF's general.architecture. "llama" is Mixtral only when expert_count > 0 (a dense Llama
// is refused). Unknown names: unsupported_architecture_error.
Result<Architecture> architecture_from_gguf(std::string_view gguf_arch, uint64_t expert_count);

// From config.json: model_type when present, else architectures[0] (the class name). Unknown:
// unsupported_architecture_error naming what was found.
Result<Architecture> architecture_from_hf(std::string_view model_type, std::string_view hf_class);

// Tandem's name, GGUF arch or HF model_type ("qwen3_moe") to the enum; nullopt when unknown.
std::optional<Architecture> architecture_from_name(std::string_view name);

}  // namespace tandem::model
