// The model's tokenizer, and the tokenizer directory the gateway reads (tokenizer.json, its
// configuration and chat template), found or exported at start.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/file_replace.h"
#include "base/result.h"
#include "engine/facade/engine_options.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::engine {

// The tokenizer of the checkpoint at `path`: a GGUF file's tokenizer.ggml.* metadata, or a
// Hugging Face directory's tokenizer.json. A directory without tokenizer.json has none (null,
// with a warning: text input and stop strings are then unavailable); the loader's error otherwise.
Result<std::unique_ptr<tokenizer::Tokenizer>> load_model_tokenizer(const std::string& path);

// The directory reported as the tokenizer path (the rules of EngineOptions::tokenizer_dir),
// absolute. A directory it creates is owned by `created` (removed when that is destroyed): a fixed
// name under a shared parent could be planted by another local user. Errors name
// model.tokenizer_dir.
Result<std::string> tokenizer_directory(const EngineOptions& options, OwnedDirectory& created);

// eos_token_id of <dir>/generation_config.json (an id or a list of ids), which Hugging Face
// generation stops on and the gateway reads too; empty when absent or unreadable.
std::vector<int32_t> generation_config_eos(const std::string& dir);

// `path` made absolute and normal; `path` itself when that fails.
std::string absolute_path(const std::string& path);

}  // namespace tandem::engine
