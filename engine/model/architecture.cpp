// The list of supported architectures and lookups by GGUF / HF name.
#include "engine/model/architecture.h"

#include <algorithm>
#include <array>
#include <string>

#include "base/check.h"
#include "engine/model/archs/archs.h"

namespace tandem::model {

namespace {

// Every architecture (each defined in its file under archs/), in the order of the "supported:"
// list. Adding one: its file, and its line here and in archs.h.
constexpr std::array<const ArchitectureTraits*, 8> kArchitectures = {
    &kQwen3MoeArch, &kQwen2MoeArch,  &kMixtralArch, &kOlmoeArch,
    &kGptOssArch,   &kDeepseek2Arch, &kGlm4MoeArch, &kMinimaxM2Arch,
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

std::span<const ArchitectureTraits* const> architectures() {
  return kArchitectures;
}

const ArchitectureTraits& traits(Architecture architecture) {
  for (const ArchitectureTraits* t : kArchitectures) {
    if (t->architecture == architecture) return *t;
  }
  TANDEM_CHECK_MSG(false, "Architecture value outside the table");
  return *kArchitectures[0];
}

std::string_view architecture_name(Architecture architecture) {
  return traits(architecture).name;
}

std::string supported_architectures_list() {
  std::string out;
  for (const ArchitectureTraits* t : kArchitectures) {
    if (!out.empty()) out += ", ";
    out += t->name;
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
  for (const ArchitectureTraits* t : kArchitectures) {
    if (t->gguf_arch == gguf_arch) return t->architecture;
  }
  return unsupported_architecture_error(gguf_arch);
}

Result<Architecture> architecture_from_hf(std::string_view model_type, std::string_view hf_class) {
  for (const ArchitectureTraits* t : kArchitectures) {
    const auto& aliases = t->hf_model_type_aliases;
    const bool type_matches =
        t->hf_model_type == model_type ||
        std::find(aliases.begin(), aliases.end(), model_type) != aliases.end();
    if (!model_type.empty() ? type_matches : t->hf_class == hf_class) {
      return t->architecture;
    }
  }
  if (model_type.empty() && hf_class.empty()) {
    return unsupported_architecture_error("(config.json names no model_type or architectures)");
  }
  return unsupported_architecture_error(!model_type.empty() ? model_type : hf_class);
}

std::optional<Architecture> architecture_from_name(std::string_view name) {
  for (const ArchitectureTraits* t : kArchitectures) {
    if (t->name == name || t->hf_model_type == name || (t->gguf_arch == name && name != "llama")) {
      return t->architecture;
    }
  }
  return std::nullopt;
}

}  // namespace tandem::model
