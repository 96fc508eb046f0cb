// olmoe (OLMoE): GQA with a QK norm over the whole projection, softmax then top-k routing, not
// renormalised by default; its names, recipe and config.json MoE fields (llama.cpp's
// src/models/olmoe.cpp; transformers' modeling_olmoe.py).
#include "engine/model/archs/archs.h"

namespace tandem::model {

namespace {

void read_olmoe_hf(FieldReader& f, ModelSpec& s) {
  read_routed_experts_hf(f, "intermediate_size", s);
  s.norm_topk_prob = f.optional_bool("norm_topk_prob").value_or(false);
  if (f.optional_f64("clip_qkv")) f.problem("clip_qkv is not supported");
}

constexpr SpecReaders kReaders{.hf = read_olmoe_hf};

}  // namespace

constexpr ArchitectureTraits kOlmoeArch{
    .architecture = Architecture::kOlmoe,
    .name = "olmoe",
    .gguf_arch = "olmoe",
    .hf_model_type = "olmoe",
    .hf_class = "OlmoeForCausalLM",
    .recipe = {.qk_norm = QkNorm::kWholeProjection},
    .spec_readers = &kReaders,
};

}  // namespace tandem::model
