// The table of supported architectures and lookups by GGUF / HF name.
#include "engine/model/architecture.h"

#include <array>
#include <string>

namespace tandem::model {

namespace {

// Facts: llama.cpp's build_moe_ffn arguments and hard-coded constants per arch
// (src/models/*.cpp); transformers' modeling files for Q/K norm shapes, biases and shared experts.
constexpr LayerRecipe kQwen3MoeRecipe{.qk_norm = QkNorm::kPerHead, .default_norm_topk_prob = true};
constexpr LayerRecipe kQwen2MoeRecipe{.qkv_bias = true,
                                      .shared_expert = SharedExpertKind::kSigmoidGated};
constexpr LayerRecipe kMixtralRecipe{.default_norm_topk_prob = true};
constexpr LayerRecipe kOlmoeRecipe{.qk_norm = QkNorm::kWholeProjection};
constexpr LayerRecipe kGptOssRecipe{.qkv_bias = true,
                                    .attn_out_bias = true,
                                    .attn_sinks = true,
                                    .sliding_window = true,
                                    .routing = RoutingPolicy::kTopKSoftmax,
                                    .router_bias = true,
                                    .activation = ExpertActivation::kSwiGluOai,
                                    .expert_bias = true};
// DeepSeek-V2/V3, Kimi-K2 (llama.cpp src/models/deepseek2.cpp): MLA, sigmoid routing with an
// optional selection bias (the gating key may say softmax: spec_from_gguf), a plain shared expert.
constexpr LayerRecipe kDeepseek2Recipe{.attention = AttentionKind::kMla,
                                       .routing = RoutingPolicy::kSigmoidTopK,
                                       .selection_bias = true,
                                       .shared_expert = SharedExpertKind::kPlain};
// GLM-4.5 (src/models/glm4-moe.cpp): q/k/v biases and the per-head QK norm as the file has them
// (spec readers), sigmoid routing with a selection bias, a plain shared expert.
constexpr LayerRecipe kGlm4MoeRecipe{.qkv_bias = true,
                                     .routing = RoutingPolicy::kSigmoidTopK,
                                     .selection_bias = true,
                                     .shared_expert = SharedExpertKind::kPlain,
                                     .default_norm_topk_prob = false};
// MiniMax-M2 (src/models/minimax-m2.cpp): Q/K norm over the whole projection, sigmoid routing
// with a selection bias, always renormalised.
constexpr LayerRecipe kMinimaxM2Recipe{.qk_norm = QkNorm::kWholeProjection,
                                       .routing = RoutingPolicy::kSigmoidTopK,
                                       .selection_bias = true,
                                       .default_norm_topk_prob = true};

constexpr std::array kArchitectures = {
    ArchitectureTraits{Architecture::kQwen3Moe, "qwen3moe", "qwen3moe", "qwen3_moe",
                       "Qwen3MoeForCausalLM", kQwen3MoeRecipe, "ffn_norm",
                       /*mixtral_names=*/false},
    ArchitectureTraits{Architecture::kQwen2Moe, "qwen2moe", "qwen2moe", "qwen2_moe",
                       "Qwen2MoeForCausalLM", kQwen2MoeRecipe, "ffn_norm", false},
    ArchitectureTraits{Architecture::kMixtral, "mixtral", "llama", "mixtral", "MixtralForCausalLM",
                       kMixtralRecipe, "ffn_norm", true},
    ArchitectureTraits{Architecture::kOlmoe, "olmoe", "olmoe", "olmoe", "OlmoeForCausalLM",
                       kOlmoeRecipe, "ffn_norm", false},
    ArchitectureTraits{Architecture::kGptOss, "gpt-oss", "gpt-oss", "gpt_oss", "GptOssForCausalLM",
                       kGptOssRecipe, "post_attention_norm", false},
    ArchitectureTraits{Architecture::kDeepseek2, "deepseek2", "deepseek2", "deepseek_v3",
                       "DeepseekV3ForCausalLM", kDeepseek2Recipe, "ffn_norm", false},
    ArchitectureTraits{Architecture::kGlm4Moe, "glm4moe", "glm4moe", "glm4_moe",
                       "Glm4MoeForCausalLM", kGlm4MoeRecipe, "post_attention_norm", false},
    ArchitectureTraits{Architecture::kMinimaxM2, "minimax-m2", "minimax-m2", "minimax_m2",
                       "MiniMaxM2ForCausalLM", kMinimaxM2Recipe, "ffn_norm", true},
};

}  // namespace

std::string_view routing_policy_name(RoutingPolicy policy) {
  switch (policy) {
    case RoutingPolicy::kSoftmaxTopK:
      return "softmax_topk";
    case RoutingPolicy::kTopKSoftmax:
      return "topk_softmax";
    case RoutingPolicy::kSigmoidTopK:
      return "sigmoid_topk";
  }
  return "unknown";
}

std::string_view attention_kind_name(AttentionKind kind) {
  return kind == AttentionKind::kMla ? "mla" : "gqa";
}

std::span<const ArchitectureTraits> architectures() {
  return kArchitectures;
}

const ArchitectureTraits& traits(Architecture architecture) {
  for (const ArchitectureTraits& t : kArchitectures) {
    if (t.architecture == architecture) return t;
  }
  TANDEM_CHECK_MSG(false, "Architecture value outside the table");
  return kArchitectures[0];
}

std::string_view architecture_name(Architecture architecture) {
  return traits(architecture).name;
}

std::string supported_architectures_list() {
  std::string out;
  for (const ArchitectureTraits& t : kArchitectures) {
    if (!out.empty()) out += ", ";
    out += t.name;
  }
  return out;
}

Status unsupported_architecture_error(std::string_view name) {
  return unimplemented_error("architecture " + std::string(name) +
                             " is not supported; supported: " + supported_architectures_list());
}

Result<Architecture> architecture_from_gguf(std::string_view gguf_arch, uint64_t expert_count) {
  if (gguf_arch == "llama") {
    if (expert_count > 0) return Architecture::kMixtral;
    return unsupported_architecture_error("llama (dense, expert_count = 0)");
  }
  for (const ArchitectureTraits& t : kArchitectures) {
    if (t.gguf_arch == gguf_arch) return t.architecture;
  }
  return unsupported_architecture_error(gguf_arch);
}

Result<Architecture> architecture_from_hf(std::string_view model_type, std::string_view hf_class) {
  for (const ArchitectureTraits& t : kArchitectures) {
    if (!model_type.empty() ? t.hf_model_type == model_type : t.hf_class == hf_class) {
      return t.architecture;
    }
  }
  if (model_type.empty() && hf_class.empty()) {
    return unsupported_architecture_error("(config.json names no model_type or architectures)");
  }
  return unsupported_architecture_error(!model_type.empty() ? model_type : hf_class);
}

std::optional<Architecture> architecture_from_name(std::string_view name) {
  for (const ArchitectureTraits& t : kArchitectures) {
    if (t.name == name || t.hf_model_type == name || (t.gguf_arch == name && name != "llama")) {
      return t.architecture;
    }
  }
  return std::nullopt;
}

}  // namespace tandem::model
