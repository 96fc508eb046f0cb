// mixtral (Mixtral 8x7B / 8x22B; GGUF general.architecture "llama" with experts): GQA, softmax
// then top-k routing, always renormalised, normal (not NEOX) RoPE in GGUF, the block_sparse_moe
// HF names (llama.cpp's src/models/llama.cpp; transformers' modeling_mixtral.py).
#include <string>

#include "engine/model/archs/archs.h"

namespace tandem::model {

namespace {

void read_mixtral_gguf(const GgufFile&, const std::string&, KeyReader&, ModelSpec& s) {
  s.rope.type = RopeType::kNormal;  // GGUF llama is LLAMA_ROPE_TYPE_NORM
}

void read_mixtral_hf(FieldReader& f, ModelSpec& s) {
  read_routed_experts_hf(f, "intermediate_size", s);
  s.norm_topk_prob = true;  // softmax over the top-k logits
}

constexpr SpecReaders kReaders{
    .gguf = read_mixtral_gguf, .hf = read_mixtral_hf, .hf_rope_theta = 1e6};

}  // namespace

constexpr ArchitectureTraits kMixtralArch{
    .architecture = Architecture::kMixtral,
    .name = "mixtral",
    .gguf_arch = "llama",
    .hf_model_type = "mixtral",
    .hf_class = "MixtralForCausalLM",
    .recipe = {.default_norm_topk_prob = true},
    .hf = kBlockSparseMoeHfNames,
    .spec_readers = &kReaders,
};

}  // namespace tandem::model
