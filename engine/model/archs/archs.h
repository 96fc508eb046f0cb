// The internal header of engine/model/archs/: one ArchitectureTraits constant per architecture
// (names, layer recipe, HF tensor names, spec readers), each defined in its own <arch>.cpp, and
// the readers the architecture files share. architecture.cpp lists the constants; the spec
// readers (architecture_gguf.cpp, architecture_hf.cpp) call an architecture's SpecReaders after
// the keys and fields every architecture shares.
#pragma once

#include <array>
#include <string>

#include "engine/model/architecture.h"
#include "engine/model/gguf_file.h"
#include "engine/model/model_spec.h"
#include "engine/model/spec_readers.h"
#include "engine/model/weight_names.h"

namespace tandem::model {

struct SpecReaders {
  // GGUF (`p` is "<general.architecture>."): called after the common keys, vocab_size included;
  // null when the common keys say everything.
  void (*gguf)(const GgufFile& file, const std::string& p, KeyReader& keys, ModelSpec& s) = nullptr;
  // HF config.json: the MoE fields and the architecture's own, called after the common fields
  // (layers, sizes, RoPE, token ids, the recipe).
  void (*hf)(FieldReader& f, ModelSpec& s) = nullptr;
  // The config class's defaults (transformers): rope_theta and rms_norm_eps.
  double hf_rope_theta = 1e4;
  double hf_rms_norm_eps = 1e-5;
  // The RoPE of a config.json with neither rope_parameters nor rope_scaling, when it is not the
  // plain one (GPT-OSS: YaRN); null otherwise.
  void (*hf_default_rope)(RopeSpec& rope) = nullptr;
};

// The architectures, in the order of the "supported:" list (architecture.cpp).
extern const ArchitectureTraits kQwen3MoeArch;   // qwen3moe.cpp
extern const ArchitectureTraits kQwen2MoeArch;   // qwen2moe.cpp
extern const ArchitectureTraits kMixtralArch;    // mixtral.cpp
extern const ArchitectureTraits kOlmoeArch;      // olmoe.cpp
extern const ArchitectureTraits kGptOssArch;     // gpt_oss.cpp
extern const ArchitectureTraits kDeepseek2Arch;  // deepseek2.cpp
extern const ArchitectureTraits kGlm4MoeArch;    // glm4moe.cpp
extern const ArchitectureTraits kMinimaxM2Arch;  // minimax_m2.cpp

// Mixtral's HF names, which MiniMax-M2 uses too: block_sparse_moe.{gate, experts.E.{w1,w3,w2}}
// (w1 = gate, w3 = up, w2 = down), the selection bias on the block.
inline constexpr HfNames kBlockSparseMoeHfNames{
    .moe_prefix = "block_sparse_moe.",
    .expert_projections = {"w1.weight", "w3.weight", "w2.weight"},
    .selection_bias = "e_score_correction_bias"};

// DeepSeek-V3's shared experts (GLM-4.5 names them the same): mlp.shared_experts.*, ungated.
inline constexpr std::array kDeepseekSharedExpertNames = {
    HfSuffix{"mlp.shared_experts.gate_proj.weight", WeightRole::kSharedGate},
    HfSuffix{"mlp.shared_experts.up_proj.weight", WeightRole::kSharedUp},
    HfSuffix{"mlp.shared_experts.down_proj.weight", WeightRole::kSharedDown},
};

// Qwen3-MoE's config.json MoE fields, which Qwen2-MoE shares: num_experts(_per_tok),
// moe_intermediate_size, norm_topk_prob, and the dense layers (decoder_sparse_step,
// mlp_only_layers; intermediate_size when there are any). qwen3moe.cpp.
void read_qwen_moe_hf(FieldReader& f, ModelSpec& s);

// The router and shared-expert keys every sigmoid-routed family shares in GGUF:
// expert_gating_func (`default_gating` when absent: llama.cpp's per-architecture default),
// expert_group_count / _used_count, expert_weights_scale, the exp_probs_b tensor's presence, and
// with `shared` the shared expert (expert_shared_count x expert_feed_forward_length, ungated).
// deepseek2.cpp.
void read_sigmoid_router_gguf(const GgufFile& file, const std::string& p, KeyReader& keys,
                              uint64_t default_gating, bool shared, ModelSpec& s);

// The DeepSeek-style MoE fields DeepSeek-V3 and GLM-4.5 share in config.json: n_routed_experts,
// num_experts_per_tok, moe_intermediate_size, n_shared_experts, routed_scaling_factor, n_group,
// topk_group, norm_topk_prob, first_k_dense_replace (+ intermediate_size for the dense layers);
// sigmoid scores with e_score_correction_bias. num_nextn_predict_layers is logged as skipped.
// deepseek2.cpp.
void read_deepseek_style_moe_hf(FieldReader& f, ModelSpec& s);

// llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE values.
inline constexpr uint64_t kGatingSoftmax = 1;
inline constexpr uint64_t kGatingSigmoid = 2;

}  // namespace tandem::model
