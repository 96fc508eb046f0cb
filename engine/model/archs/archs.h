// Per-architecture spec readers of the sigmoid-routed MoE families (DeepSeek-V2/V3 and Kimi-K2,
// GLM-4.5, MiniMax-M2): what their GGUF keys and config.json fields mean beyond the common ones
// that spec_from_gguf / spec_from_hf_config read. One file per architecture; each reader fills
// the ModelSpec fields its family sets and reports problems through the reader it is given.
#pragma once

#include <string>

#include "engine/model/gguf_file.h"
#include "engine/model/model_spec.h"
#include "engine/model/spec_readers.h"

namespace tandem::model {

// GGUF (`p` is "<general.architecture>."): called after the common keys, vocab_size included.
void read_deepseek2_gguf(const GgufFile& file, const std::string& p, KeyReader& keys, ModelSpec& s);
void read_glm4moe_gguf(const GgufFile& file, const std::string& p, KeyReader& keys, ModelSpec& s);
void read_minimax_m2_gguf(const GgufFile& file, const std::string& p, KeyReader& keys,
                          ModelSpec& s);

// The router and shared-expert keys every sigmoid-routed family shares in GGUF:
// expert_gating_func (`default_gating` when absent: llama.cpp's per-architecture default),
// expert_group_count / _used_count, expert_weights_scale, the exp_probs_b tensor's presence, and
// with `shared` the shared expert (expert_shared_count x expert_feed_forward_length, ungated).
void read_sigmoid_router_gguf(const GgufFile& file, const std::string& p, KeyReader& keys,
                              uint64_t default_gating, bool shared, ModelSpec& s);

// HF config.json: called after the common fields (layers, sizes, RoPE, token ids).
void read_deepseek_v3_hf(FieldReader& f, ModelSpec& s);
void read_glm4_moe_hf(FieldReader& f, ModelSpec& s);
void read_minimax_m2_hf(FieldReader& f, ModelSpec& s);

// The DeepSeek-style MoE fields DeepSeek-V3 and GLM-4.5 share in config.json: n_routed_experts,
// num_experts_per_tok, moe_intermediate_size, n_shared_experts, routed_scaling_factor, n_group,
// topk_group, norm_topk_prob, first_k_dense_replace (+ intermediate_size for the dense layers);
// sigmoid scores with e_score_correction_bias. num_nextn_predict_layers is logged as skipped.
void read_deepseek_style_moe_hf(FieldReader& f, ModelSpec& s);

// llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE values.
inline constexpr uint64_t kGatingSoftmax = 1;
inline constexpr uint64_t kGatingSigmoid = 2;

}  // namespace tandem::model
