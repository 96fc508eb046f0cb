// Canonical weight names: parsing GGUF and HF tensor names.
#include "engine/model/weight_names.h"

#include <array>
#include <charconv>
#include <utility>

#include "base/check.h"
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

struct HfSuffix {
  std::string_view suffix;
  WeightRole role;
};

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
    HfSuffix{"mlp.shared_expert.gate_proj.weight", WeightRole::kSharedGate},
    HfSuffix{"mlp.shared_expert.up_proj.weight", WeightRole::kSharedUp},
    HfSuffix{"mlp.shared_expert.down_proj.weight", WeightRole::kSharedDown},
    HfSuffix{"mlp.shared_expert_gate.weight", WeightRole::kSharedExpertGate},
    // DeepSeek-V3 / GLM-4.5 shared experts; DeepSeek's MLA projections.
    HfSuffix{"mlp.shared_experts.gate_proj.weight", WeightRole::kSharedGate},
    HfSuffix{"mlp.shared_experts.up_proj.weight", WeightRole::kSharedUp},
    HfSuffix{"mlp.shared_experts.down_proj.weight", WeightRole::kSharedDown},
    HfSuffix{"self_attn.q_a_proj.weight", WeightRole::kAttnQA},
    HfSuffix{"self_attn.q_a_layernorm.weight", WeightRole::kAttnQANorm},
    HfSuffix{"self_attn.q_b_proj.weight", WeightRole::kAttnQB},
    HfSuffix{"self_attn.kv_a_proj_with_mqa.weight", WeightRole::kAttnKvA},
    HfSuffix{"self_attn.kv_a_layernorm.weight", WeightRole::kAttnKvANorm},
    HfSuffix{"self_attn.kv_b_proj.weight", WeightRole::kAttnKvB},
};

// GPT-OSS's own layer names (transformers' modeling_gpt_oss.py), and the names of the tensors
// the expert repack derives (gpt_oss_hf_derived_name).
constexpr std::array kHfGptOss = {
    HfSuffix{"self_attn.o_proj.bias", WeightRole::kAttnOBias},
    HfSuffix{"self_attn.sinks", WeightRole::kAttnSinks},
    HfSuffix{"mlp.router.weight", WeightRole::kRouter},
    HfSuffix{"mlp.router.bias", WeightRole::kRouterBias},
    HfSuffix{"mlp.experts.down_proj_bias", WeightRole::kExpertDownBias},
    HfSuffix{"mlp.experts.gate_proj.weight", WeightRole::kExpertGate},
    HfSuffix{"mlp.experts.up_proj.weight", WeightRole::kExpertUp},
    HfSuffix{"mlp.experts.down_proj.weight", WeightRole::kExpertDown},
    HfSuffix{"mlp.experts.gate_proj.bias", WeightRole::kExpertGateBias},
    HfSuffix{"mlp.experts.up_proj.bias", WeightRole::kExpertUpBias},
};

std::optional<CanonicalName> hf_layer_tensor(int64_t layer, std::string_view rest,
                                             Architecture arch) {
  if (arch == Architecture::kGptOss) {
    for (const HfSuffix& s : kHfGptOss) {
      if (rest == s.suffix) return layer_name(s.role, layer);
    }
    if (rest.starts_with("mlp.")) return std::nullopt;  // no dense FFN, no mlp.gate
  }
  const bool mixtral = traits(arch).mixtral_names;
  const std::string_view moe = mixtral ? "block_sparse_moe." : "mlp.";
  std::string_view r = rest;
  if (consume_prefix(r, moe)) {
    if (r == "gate.weight") return layer_name(WeightRole::kRouter, layer);
    // The selection bias: on the router (DeepSeek-V3, GLM-4.5) or on the block (MiniMax-M2).
    if (r == "gate.e_score_correction_bias" || r == "e_score_correction_bias") {
      return layer_name(WeightRole::kRouterSelectionBias, layer);
    }
    if (consume_prefix(r, "experts.")) {
      auto split = split_index(r);
      if (!split) return std::nullopt;
      auto [expert, proj] = *split;
      const std::array<HfSuffix, 3> projections =
          mixtral ? std::array{HfSuffix{"w1.weight", WeightRole::kExpertGate},
                               HfSuffix{"w3.weight", WeightRole::kExpertUp},
                               HfSuffix{"w2.weight", WeightRole::kExpertDown}}
                  : std::array{HfSuffix{"gate_proj.weight", WeightRole::kExpertGate},
                               HfSuffix{"up_proj.weight", WeightRole::kExpertUp},
                               HfSuffix{"down_proj.weight", WeightRole::kExpertDown}};
      for (const HfSuffix& p : projections) {
        if (proj == p.suffix) return layer_name(p.role, layer, expert);
      }
      return std::nullopt;
    }
  }
  for (const HfSuffix& s : kHfLayerCommon) {
    if (rest == s.suffix) return layer_name(s.role, layer);
  }
  return std::nullopt;
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

}  // namespace tandem::model

namespace tandem::model {

namespace {

// The file tensor a GPT-OSS HF role comes from (for messages): the MXFP4 layout every published
// checkpoint uses for the expert matrices.
std::string_view gpt_oss_hf_source_suffix(WeightRole role) {
  switch (role) {
    case WeightRole::kExpertGate:
    case WeightRole::kExpertUp:
      return "mlp.experts.gate_up_proj_blocks";
    case WeightRole::kExpertDown:
      return "mlp.experts.down_proj_blocks";
    case WeightRole::kExpertGateBias:
    case WeightRole::kExpertUpBias:
      return "mlp.experts.gate_up_proj_bias";
    default:
      break;
  }
  for (const HfSuffix& s : kHfGptOss) {
    if (s.role == role) return s.suffix;
  }
  return {};
}

std::string_view hf_role_suffix(WeightRole role, bool mixtral) {
  switch (role) {
    case WeightRole::kRouter:
      return mixtral ? "block_sparse_moe.gate.weight" : "mlp.gate.weight";
    case WeightRole::kRouterSelectionBias:
      return mixtral ? "block_sparse_moe.e_score_correction_bias"
                     : "mlp.gate.e_score_correction_bias";
    case WeightRole::kExpertGate:
      return mixtral ? "w1.weight" : "gate_proj.weight";
    case WeightRole::kExpertUp:
      return mixtral ? "w3.weight" : "up_proj.weight";
    case WeightRole::kExpertDown:
      return mixtral ? "w2.weight" : "down_proj.weight";
    default:
      break;
  }
  for (const HfSuffix& s : kHfLayerCommon) {
    if (s.role == role) return s.suffix;
  }
  return "?";
}

}  // namespace

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
  const bool mixtral = traits(arch).mixtral_names;
  std::string out = "model.layers." + std::to_string(name.layer) + ".";
  if (arch == Architecture::kGptOss) {
    if (std::string_view suffix = gpt_oss_hf_source_suffix(name.role); !suffix.empty()) {
      return out + std::string(suffix);
    }
  }
  if (is_expert_role(name.role)) {
    out += mixtral ? "block_sparse_moe.experts." : "mlp.experts.";
    out += name.expert >= 0 ? std::to_string(name.expert) : std::string("E");
    out += ".";
  }
  out += hf_role_suffix(name.role, mixtral);
  return out;
}

std::string gpt_oss_hf_derived_name(WeightRole role, int64_t layer) {
  std::string_view suffix;
  switch (role) {
    case WeightRole::kExpertGate:
      suffix = "gate_proj.weight";
      break;
    case WeightRole::kExpertUp:
      suffix = "up_proj.weight";
      break;
    case WeightRole::kExpertDown:
      suffix = "down_proj.weight";
      break;
    case WeightRole::kExpertGateBias:
      suffix = "gate_proj.bias";
      break;
    case WeightRole::kExpertUpBias:
      suffix = "up_proj.bias";
      break;
    default:
      TANDEM_CHECK_MSG(false, "gpt_oss_hf_derived_name: not a derived role");
  }
  return "model.layers." + std::to_string(layer) + ".mlp.experts." + std::string(suffix);
}

}  // namespace tandem::model
