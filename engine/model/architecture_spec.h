// Building a ModelSpec from a checkpoint's own description: GGUF metadata or HF config.json.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "engine/model/gguf_file.h"
#include "engine/model/model_spec.h"

namespace tandem::model {

// The spec a GGUF file describes. UNIMPLEMENTED (unsupported_architecture_error) when
// general.architecture is not one Tandem runs; INVALID_ARGUMENT listing every missing or
// mistyped key otherwise. The result is not yet validated (see validate_spec / bind_weights).
// vocab_size comes from tokenizer.ggml.tokens, else <arch>.vocab_size, else token_embd's rows;
// tied_embeddings is set when there is no output.weight tensor.
Result<ModelSpec> spec_from_gguf(const GgufFile& file);

// The spec a parsed HF config.json describes; `source` names the file in messages. Errors as for
// spec_from_gguf. Every HF checkpoint uses NEOX RoPE (transformers' rotate_half).
Result<ModelSpec> spec_from_hf_config(const nlohmann::json& config, std::string_view source);

}  // namespace tandem::model
