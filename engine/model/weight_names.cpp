// Canonical weight names: parsing GGUF and HF tensor names.
#include "engine/model/weight_names.h"

#include <array>
#include <charconv>
#include <span>
#include <string>
#include <utility>

#include "engine/model/layer_roles.h"

namespace tandem::model {

namespace {

// A role's GGUF name (the layer roles' come from layer_roles()).
struct RoleName {
  WeightRole role;
  std::string_view name;
};

constexpr std::array kModelRoleNames = {
    RoleName{WeightRole::kTokenEmbedding, "token_embd"},
    RoleName{WeightRole::kOutputNorm, "output_norm"},
    RoleName{WeightRole::kLmHead, "output"},
};

// Layer roles whose GGUF tensor name ends in ".bias" (the others end in ".weight").
bool is_gguf_bias(const LayerRole& r) {
  return r.gguf.ends_with(".bias");
}

// Parses a non-negative decimal index (no sign, no leading '+'); nullopt otherwise.
std::optional<int64_t> parse_index(std::string_view s) {
  if (s.empty() || s.size() > 9 || s[0] < '0' || s[0] > '9') return std::nullopt;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

bool consume_prefix(std::string_view& s, std::string_view prefix) {
  if (!s.starts_with(prefix)) return false;
  s.remove_prefix(prefix.size());
  return true;
}

bool consume_suffix(std::string_view& s, std::string_view suffix) {
  if (!s.ends_with(suffix)) return false;
  s.remove_suffix(suffix.size());
  return true;
}

// Splits "N.rest" into N and rest.
std::optional<std::pair<int64_t, std::string_view>> split_index(std::string_view s) {
  size_t dot = s.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  std::optional<int64_t> index = parse_index(s.substr(0, dot));
  if (!index) return std::nullopt;
  return std::make_pair(*index, s.substr(dot + 1));
}

CanonicalName layer_name(WeightRole role, int64_t layer, int64_t expert = -1) {
  return CanonicalName{role, layer, expert};
}

std::optional<CanonicalName> gguf_layer_tensor(int64_t layer, std::string_view rest,
                                               Architecture arch) {
  for (const LayerRole& r : layer_roles()) {
    if (is_gguf_bias(r) && r.gguf == rest) return layer_name(r.role, layer);
  }
  if (!consume_suffix(rest, ".weight")) return std::nullopt;
  const std::string_view ffn_norm = traits(arch).gguf_ffn_norm;
  if (rest == ffn_norm) return layer_name(WeightRole::kFfnNorm, layer);
  // Legacy per-expert layout: ffn_gate.E / ffn_up.E / ffn_down.E.
  for (auto [prefix, role] : {std::pair{std::string_view("ffn_gate."), WeightRole::kExpertGate},
                              std::pair{std::string_view("ffn_up."), WeightRole::kExpertUp},
                              std::pair{std::string_view("ffn_down."), WeightRole::kExpertDown}}) {
    std::string_view r = rest;
    if (consume_prefix(r, prefix)) {
      std::optional<int64_t> expert = parse_index(r);
      if (!expert) return std::nullopt;
      return layer_name(role, layer, *expert);
    }
  }
  for (const LayerRole& r : layer_roles()) {
    if (r.gguf == rest && !is_gguf_bias(r) && r.role != WeightRole::kFfnNorm) {
      return layer_name(r.role, layer);
    }
  }
  return std::nullopt;
}

// The layer names every architecture shares (ArchitectureTraits::hf holds the rest).
constexpr std::array kHfLayerCommon = {
    HfSuffix{"input_layernorm.weight", WeightRole::kAttnNorm},
    HfSuffix{"post_attention_layernorm.weight", WeightRole::kFfnNorm},
    HfSuffix{"self_attn.q_proj.weight", WeightRole::kAttnQ},
    HfSuffix{"self_attn.k_proj.weight", WeightRole::kAttnK},
    HfSuffix{"self_attn.v_proj.weight", WeightRole::kAttnV},
    HfSuffix{"self_attn.o_proj.weight", WeightRole::kAttnO},
    HfSuffix{"self_attn.q_proj.bias", WeightRole::kAttnQBias},
    HfSuffix{"self_attn.k_proj.bias", WeightRole::kAttnKBias},
    HfSuffix{"self_attn.v_proj.bias", WeightRole::kAttnVBias},
    HfSuffix{"self_attn.q_norm.weight", WeightRole::kAttnQNorm},
    HfSuffix{"self_attn.k_norm.weight", WeightRole::kAttnKNorm},
    HfSuffix{"mlp.gate_proj.weight", WeightRole::kDenseGate},
    HfSuffix{"mlp.up_proj.weight", WeightRole::kDenseUp},
    HfSuffix{"mlp.down_proj.weight", WeightRole::kDenseDown},
};

// The routed-expert roles in the order of HfNames::expert_projections.
constexpr std::array kExpertRoles = {WeightRole::kExpertGate, WeightRole::kExpertUp,
                                     WeightRole::kExpertDown};

std::optional<WeightRole> role_of(std::span<const HfSuffix> table, std::string_view suffix) {
  for (const HfSuffix& s : table) {
    if (s.suffix == suffix) return s.role;
  }
  return std::nullopt;
}

// The first suffix of `role` in `table`; empty when none.
std::string_view suffix_of(std::span<const HfSuffix> table, WeightRole role) {
  for (const HfSuffix& s : table) {
    if (s.role == role) return s.suffix;
  }
  return {};
}

std::optional<CanonicalName> hf_layer_tensor(int64_t layer, std::string_view rest,
                                             Architecture arch) {
  const HfNames& hf = traits(arch).hf;
  for (std::span<const HfSuffix> own : {hf.extra, hf.shared_expert}) {
    if (std::optional<WeightRole> role = role_of(own, rest)) return layer_name(*role, layer);
  }
  if (hf.own_mlp_names && rest.starts_with("mlp.")) return std::nullopt;
  std::string_view r = rest;
  if (consume_prefix(r, hf.moe_prefix)) {
    if (r == "gate.weight") return layer_name(WeightRole::kRouter, layer);
    // The selection bias: on the router (DeepSeek-V3, GLM-4.5) or on the block (MiniMax-M2).
    if (r == "gate.e_score_correction_bias" || r == "e_score_correction_bias") {
      return layer_name(WeightRole::kRouterSelectionBias, layer);
    }
    if (consume_prefix(r, "experts.")) {
      auto split = split_index(r);
      if (!split) return std::nullopt;
      auto [expert, proj] = *split;
      for (size_t i = 0; i < kExpertRoles.size(); ++i) {
        if (proj == hf.expert_projections[i]) return layer_name(kExpertRoles[i], layer, expert);
      }
      return std::nullopt;
    }
  }
  if (std::optional<WeightRole> role = role_of(kHfLayerCommon, rest)) {
    return layer_name(*role, layer);
  }
  return std::nullopt;
}

// A layer tensor's HF name after "model.layers.N." ("?" when `arch` names no such tensor).
std::string hf_layer_suffix(const CanonicalName& name, const HfNames& hf) {
  for (std::span<const HfSuffix> own : {hf.sources, hf.extra, hf.shared_expert}) {
    if (std::string_view suffix = suffix_of(own, name.role); !suffix.empty()) {
      return std::string(suffix);
    }
  }
  const std::string moe(hf.moe_prefix);
  for (size_t i = 0; i < kExpertRoles.size(); ++i) {
    if (name.role != kExpertRoles[i]) continue;
    const std::string expert = name.expert >= 0 ? std::to_string(name.expert) : "E";
    return moe + "experts." + expert + "." + std::string(hf.expert_projections[i]);
  }
  if (name.role == WeightRole::kRouter) return moe + "gate.weight";
  if (name.role == WeightRole::kRouterSelectionBias) return moe + std::string(hf.selection_bias);
  const std::string_view suffix = suffix_of(kHfLayerCommon, name.role);
  return suffix.empty() ? "?" : std::string(suffix);
}

}  // namespace

std::string_view weight_role_name(WeightRole role) {
  switch (role) {
    case WeightRole::kExpertGate:
      return "expert_gate";
    case WeightRole::kExpertUp:
      return "expert_up";
    case WeightRole::kExpertDown:
      return "expert_down";
    default:
      break;
  }
  for (const RoleName& rn : kModelRoleNames) {
    if (rn.role == role) return rn.name;
  }
  return layer_role(role).gguf;
}

bool is_expert_role(WeightRole role) {
  return role == WeightRole::kExpertGate || role == WeightRole::kExpertUp ||
         role == WeightRole::kExpertDown;
}

std::string canonical_name_string(const CanonicalName& name) {
  std::string out;
  if (name.layer >= 0) out = "blk." + std::to_string(name.layer) + ".";
  out += weight_role_name(name.role);
  if (name.expert >= 0) out += "[" + std::to_string(name.expert) + "]";
  return out;
}

std::optional<CanonicalName> canonical_from_gguf(std::string_view tensor_name, Architecture arch) {
  if (tensor_name == "token_embd.weight") return CanonicalName{WeightRole::kTokenEmbedding};
  if (tensor_name == "output_norm.weight") return CanonicalName{WeightRole::kOutputNorm};
  if (tensor_name == "output.weight") return CanonicalName{WeightRole::kLmHead};
  std::string_view rest = tensor_name;
  if (!consume_prefix(rest, "blk.")) return std::nullopt;
  auto split = split_index(rest);
  if (!split) return std::nullopt;
  return gguf_layer_tensor(split->first, split->second, arch);
}

std::optional<CanonicalName> canonical_from_hf(std::string_view tensor_name, Architecture arch) {
  if (tensor_name == "model.embed_tokens.weight") return CanonicalName{WeightRole::kTokenEmbedding};
  if (tensor_name == "model.norm.weight") return CanonicalName{WeightRole::kOutputNorm};
  if (tensor_name == "lm_head.weight") return CanonicalName{WeightRole::kLmHead};
  std::string_view rest = tensor_name;
  if (!consume_prefix(rest, "model.layers.")) return std::nullopt;
  auto split = split_index(rest);
  if (!split) return std::nullopt;
  return hf_layer_tensor(split->first, split->second, arch);
}

std::string file_tensor_name(const CanonicalName& name, TensorNaming naming, Architecture arch) {
  if (naming == TensorNaming::kGguf) {
    switch (name.role) {
      case WeightRole::kTokenEmbedding:
      case WeightRole::kOutputNorm:
      case WeightRole::kLmHead:
        return std::string(weight_role_name(name.role)) + ".weight";
      case WeightRole::kFfnNorm:
        return "blk." + std::to_string(name.layer) + "." + std::string(traits(arch).gguf_ffn_norm) +
               ".weight";
      default:
        break;
    }
    if (is_gguf_bias(layer_role(name.role))) {
      return "blk." + std::to_string(name.layer) + "." + std::string(weight_role_name(name.role));
    }
    std::string role(weight_role_name(name.role));
    if (is_expert_role(name.role)) {
      if (name.expert >= 0) {
        role = role == "expert_gate" ? "ffn_gate" : role == "expert_up" ? "ffn_up" : "ffn_down";
        role += "." + std::to_string(name.expert);
      } else {
        role = role == "expert_gate" ? "ffn_gate_exps"
               : role == "expert_up" ? "ffn_up_exps"
                                     : "ffn_down_exps";
      }
    }
    return "blk." + std::to_string(name.layer) + "." + role + ".weight";
  }
  switch (name.role) {
    case WeightRole::kTokenEmbedding:
      return "model.embed_tokens.weight";
    case WeightRole::kOutputNorm:
      return "model.norm.weight";
    case WeightRole::kLmHead:
      return "lm_head.weight";
    default:
      break;
  }
  return "model.layers." + std::to_string(name.layer) + "." +
         hf_layer_suffix(name, traits(arch).hf);
}

}  // namespace tandem::model
