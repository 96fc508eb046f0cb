// Architecture: the table of MoE architectures Tandem runs, with their names in GGUF and HF.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engine/base/result.h"

namespace tandem::model {

enum class Architecture { kQwen3Moe, kQwen2Moe, kMixtral, kOlmoe };

// Static facts about one architecture. All entries live in a constant table; callers get
// references into it (valid for the whole program, any thread).
struct ArchitectureTraits {
  Architecture architecture;
  std::string_view name;           // Tandem's name: "qwen3moe", "qwen2moe", "mixtral", "olmoe"
  std::string_view gguf_arch;      // general.architecture ("llama" for Mixtral)
  std::string_view hf_model_type;  // config.json model_type
  std::string_view hf_class;       // config.json architectures[0]
  bool per_head_qk_norm;           // Q/K RMSNorm over each head (Qwen3-MoE)
  bool whole_qk_norm;              // Q/K RMSNorm over the whole projection (OLMoE)
  bool qkv_bias;                   // q/k/v projections have biases (Qwen2-MoE)
  bool shared_expert;              // one shared expert with a sigmoid gate (Qwen2-MoE)
  // Top-k renormalisation when the file does not say (GGUF never does for these archs; llama.cpp
  // hard-codes it per arch: true for qwen3moe and llama/Mixtral, false for qwen2moe and olmoe).
  bool default_norm_topk_prob;
  // HF expert weight names: Mixtral's block_sparse_moe.experts.E.{w1,w3,w2} instead of
  // mlp.experts.E.{gate,up,down}_proj.
  bool mixtral_names;
};

// The whole table, in the order of the "supported:" list.
std::span<const ArchitectureTraits> architectures();
const ArchitectureTraits& traits(Architecture architecture);
std::string_view architecture_name(Architecture architecture);

// "qwen3moe, qwen2moe, mixtral, olmoe".
std::string supported_architectures_list();

// UNIMPLEMENTED "architecture X is not supported; supported: qwen3moe, qwen2moe, mixtral, olmoe".
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
