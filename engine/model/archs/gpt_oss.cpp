// gpt-oss (gpt-oss-20b / 120b): GQA with q/k/v and output biases, attention sinks, sliding-window
// layers, YaRN, a biased router with softmax over the top-k, clamped-SwiGLU experts with biases;
// its names (transformers' modeling_gpt_oss.py, whose interleaved expert tensors the opener
// repacks: gpt_oss_hf_experts.h), recipe and spec readers (llama.cpp's LLM_ARCH_OPENAI_MOE).
#include <algorithm>
#include <array>
#include <optional>
#include <span>
#include <string>

#include "base/check.h"
#include "engine/model/archs/archs.h"
#include "engine/model/gpt_oss_hf_experts.h"

namespace tandem::model {

namespace {

// GPT-OSS's own layer names, and the names of the tensors the expert repack derives
// (gpt_oss_hf_derived_name).
constexpr std::array kNames = {
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

// The file tensor each derived role comes from (for messages): the MXFP4 layout every published
// checkpoint uses for the expert matrices.
constexpr std::array kSources = {
    HfSuffix{"mlp.experts.gate_up_proj_blocks", WeightRole::kExpertGate},
    HfSuffix{"mlp.experts.gate_up_proj_blocks", WeightRole::kExpertUp},
    HfSuffix{"mlp.experts.down_proj_blocks", WeightRole::kExpertDown},
    HfSuffix{"mlp.experts.gate_up_proj_bias", WeightRole::kExpertGateBias},
    HfSuffix{"mlp.experts.gate_up_proj_bias", WeightRole::kExpertUpBias},
};

// llama.cpp loads gpt-oss q/k/v biases as optional: a file without them runs without them. The
// sliding-window keys are read for every recipe with windows (architecture_gguf.cpp).
void read_gpt_oss_gguf(const GgufFile& file, const std::string&, KeyReader&, ModelSpec& s) {
  s.attn_qkv_bias = file.find_tensor("blk.0.attn_q.bias") != nullptr;
}

// GptOssConfig's rope_parameters when config.json has neither rope_parameters nor rope_scaling:
// YaRN, factor 32, beta 32 / 1, truncate false, original context 4096.
void set_default_rope(RopeSpec& rope) {
  rope.scaling = RopeScalingType::kYarn;
  rope.scaling_factor = 32.0;
  rope.original_context_length = 4096;
  rope.yarn_beta_fast = 32.0;
  rope.yarn_beta_slow = 1.0;
  rope.yarn_truncate = false;
}

// GptOssForCausalLM (transformers' configuration_gpt_oss.py / modeling_gpt_oss.py): experts,
// top-k, expert FFN, the per-layer attention kind, attention biases, and the fixed constants of
// the clamped SwiGLU. The expert tensors themselves are repacked at open (gpt_oss_hf_experts.h).
void read_gpt_oss_hf(FieldReader& f, ModelSpec& s) {
  const json& c = f.config();
  s.n_experts = f.expert_count();
  // num_experts_per_tok (transformers) or experts_per_token (OpenAI's own key, which
  // gpt-oss's config.json carries too).
  const std::optional<uint64_t> per_tok = f.optional_u64("num_experts_per_tok");
  const std::optional<uint64_t> per_token = f.optional_u64("experts_per_token");
  if (per_tok && per_token && *per_tok != *per_token) {
    f.problem("num_experts_per_tok (" + std::to_string(*per_tok) + ") != experts_per_token (" +
              std::to_string(*per_token) + ")");
  }
  if (!per_tok && !per_token && f.find(c, "num_experts_per_tok") == nullptr &&
      f.find(c, "experts_per_token") == nullptr) {
    f.problem("missing field num_experts_per_tok (or experts_per_token)");
  }
  s.n_experts_used = per_tok.value_or(per_token.value_or(0));
  s.expert_ffn_size = f.required_u64("intermediate_size");
  if (!s.head_dim_explicit) f.problem("missing field head_dim");
  s.norm_topk_prob = false;  // softmax over the k selected logits: already normalised
  const bool bias = f.optional_bool("attention_bias").value_or(true);
  s.attn_qkv_bias = bias;
  s.attn_out_bias = bias;

  // The expert activation's constants are fixed in the kernels (kSwiGluOai).
  const double limit = f.optional_f64("swiglu_limit").value_or(7.0);
  if (limit != 7.0) {
    f.problem("swiglu_limit = " + json(limit).dump() +
              " is not supported (the clamped SwiGLU's limit is fixed at 7.0)");
  }
  const double alpha = f.optional_f64("swiglu_alpha").value_or(1.702);
  if (alpha != 1.702) {
    f.problem("swiglu_alpha = " + json(alpha).dump() +
              " is not supported (the clamped SwiGLU's sigmoid gain is fixed at 1.702)");
  }
  if (const json* q = f.find(c, "quantization_config")) {
    const std::string method = q->is_object() ? f.optional_string("quant_method", q) : "";
    if (method != "mxfp4") {
      f.problem("quantization_config: quant_method " +
                (q->is_object() && q->contains("quant_method") ? (*q)["quant_method"].dump()
                                                               : std::string("(none)")) +
                " is not supported (gpt-oss: mxfp4 or no quantization_config)");
    }
  }

  // Which layers attend over a window: layer_types, else transformers' default (even layers).
  // sliding_window null: no layer is windowed (transformers passes no window then).
  const size_t n = static_cast<size_t>(std::min(s.n_layers, kMaxLayers + 1));
  s.swa_layers.assign(n, false);
  const auto window_it = c.find("sliding_window");
  if (window_it == c.end()) {
    f.problem("missing field sliding_window");
  } else if (!window_it->is_null()) {
    s.sliding_window = f.optional_u64("sliding_window").value_or(0);
  }
  if (const json* types = f.find(c, "layer_types")) {
    if (!types->is_array()) {
      f.problem("layer_types must be a list of \"sliding_attention\" / \"full_attention\"");
    } else if (types->size() != s.n_layers) {
      f.problem("layer_types lists " + std::to_string(types->size()) +
                " layers, num_hidden_layers is " + std::to_string(s.n_layers));
    } else {
      for (size_t i = 0; i < n; ++i) {
        const json& t = (*types)[i];
        if (t == "sliding_attention") {
          s.swa_layers[i] = true;
        } else if (t != "full_attention") {
          f.problem("layer_types[" + std::to_string(i) + "] is " + t.dump() +
                    ", not \"sliding_attention\" or \"full_attention\"");
        }
      }
    }
  } else {
    for (size_t i = 0; i < n; ++i) s.swa_layers[i] = i % 2 == 0;
  }
  if (s.sliding_window == 0) s.swa_layers.assign(n, false);
}

constexpr SpecReaders kReaders{.gguf = read_gpt_oss_gguf,
                               .hf = read_gpt_oss_hf,
                               .hf_rope_theta = 150000.0,
                               .hf_default_rope = set_default_rope};

const HfSuffix* find_role(std::span<const HfSuffix> table, WeightRole role) {
  auto it =
      std::find_if(table.begin(), table.end(), [&](const HfSuffix& n) { return n.role == role; });
  return it == table.end() ? nullptr : &*it;
}

}  // namespace

constexpr ArchitectureTraits kGptOssArch{
    .architecture = Architecture::kGptOss,
    .name = "gpt-oss",
    .gguf_arch = "gpt-oss",
    .hf_model_type = "gpt_oss",
    .hf_class = "GptOssForCausalLM",
    .recipe = {.qkv_bias = true,
               .attn_out_bias = true,
               .attn_sinks = true,
               .sliding_window = true,
               .routing = RoutingPolicy::kTopKSoftmax,
               .router_bias = true,
               .activation = ExpertActivation::kSwiGluOai,
               .expert_bias = true},
    .gguf_ffn_norm = "post_attention_norm",
    .hf = {.extra = kNames,
           .own_mlp_names = true,
           .sources = kSources,
           .convert = repack_gpt_oss_hf_experts},
    .spec_readers = &kReaders,
};

std::string gpt_oss_hf_derived_name(WeightRole role, int64_t layer) {
  // The derived roles are the ones that come from another file tensor.
  TANDEM_CHECK_MSG(find_role(kSources, role) != nullptr,
                   "gpt_oss_hf_derived_name: not a derived role");
  return "model.layers." + std::to_string(layer) + "." +
         std::string(find_role(kNames, role)->suffix);
}

}  // namespace tandem::model
