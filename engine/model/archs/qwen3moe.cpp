// qwen3moe (Qwen3-MoE, Qwen3-Coder): GQA with a per-head QK norm, softmax then top-k routing,
// renormalised by default, optional dense layers; its names, recipe and config.json MoE fields
// (llama.cpp's src/models/qwen3moe.cpp; transformers' modeling_qwen3_moe.py).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/model/archs/archs.h"

namespace tandem::model {

namespace {

void read_qwen3moe_hf(FieldReader& f, ModelSpec& s) {
  read_qwen_moe_hf(f, s);
  if (f.optional_bool("attention_bias").value_or(false)) {
    f.problem("attention_bias = true is not supported for qwen3moe");
  }
}

constexpr SpecReaders kReaders{.hf = read_qwen3moe_hf, .hf_rms_norm_eps = 1e-6};

}  // namespace

void read_qwen_moe_hf(FieldReader& f, ModelSpec& s) {
  read_routed_experts_hf(f, "moe_intermediate_size", s);
  s.norm_topk_prob = f.optional_bool("norm_topk_prob").value_or(false);
  const uint64_t step = f.optional_u64("decoder_sparse_step").value_or(1);
  std::vector<uint64_t> mlp_only;
  if (const json* list = f.find(f.config(), "mlp_only_layers")) {
    if (!list->is_array()) f.problem("mlp_only_layers must be a list of layer indices");
    for (const json& v : list->is_array() ? *list : json::array()) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0) {
        f.problem("mlp_only_layers holds " + v.dump() + ", not a layer index");
        continue;
      }
      mlp_only.push_back(v.get<uint64_t>());
    }
  }
  for (uint64_t i = 0; i < s.moe_layers.size(); ++i) {
    const bool listed = std::find(mlp_only.begin(), mlp_only.end(), i) != mlp_only.end();
    s.moe_layers[i] = !listed && s.n_experts > 0 && step > 0 && (i + 1) % step == 0;
  }
  if (s.n_moe_layers() < s.moe_layers.size()) {
    s.dense_ffn_size = f.required_u64("intermediate_size");
  }
}

// Facts for this and the other recipes: llama.cpp's build_moe_ffn arguments and hard-coded
// constants per arch (src/models/*.cpp); transformers' modeling files for Q/K norm shapes, biases
// and shared experts.
constexpr ArchitectureTraits kQwen3MoeArch{
    .architecture = Architecture::kQwen3Moe,
    .name = "qwen3moe",
    .gguf_arch = "qwen3moe",
    .hf_model_type = "qwen3_moe",
    .hf_class = "Qwen3MoeForCausalLM",
    .recipe = {.qk_norm = QkNorm::kPerHead, .default_norm_topk_prob = true},
    .spec_readers = &kReaders,
};

}  // namespace tandem::model
