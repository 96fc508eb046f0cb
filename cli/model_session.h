// Shared set-up for the `tandem` subcommands that run a model (logits, generate, bench, tokenize):
// open the checkpoint, build a ModelRunner, load a tokenizer, parse --prompt-ids lists.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/base/result.h"
#include "engine/model/model.h"
#include "engine/runtime/runtime.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::cli {

// The checkpoint and the runner over it (the runner views the checkpoint's weights, so both live
// together). Owned by one command on the main thread.
struct ModelSession {
  model::Checkpoint checkpoint;
  std::unique_ptr<runtime::ModelRunner> runner;
};

// Opens `path` (GGUF file or HF directory) with `threads` forward threads (0 = all cores).
Result<std::unique_ptr<ModelSession>> open_session(const std::string& path, int threads);

// The tokenizer of `path`: a GGUF file's tokenizer.ggml.* metadata, or a Hugging Face directory's
// tokenizer.json (+ tokenizer_config.json). NOT_FOUND when `path` is a directory without
// tokenizer.json; the loader's error otherwise.
Result<tokenizer::Tokenizer> load_tokenizer(const std::string& path);

// "1 2 3" or "1,2,3" -> ids. INVALID_ARGUMENT for anything that is not a list of non-negative
// integers, or an empty list.
Result<std::vector<int32_t>> parse_token_ids(const std::string& text);

// Parses a non-negative int flag value; INVALID_ARGUMENT naming the flag otherwise.
Result<int> parse_count(const char* flag, const std::string& text);

}  // namespace tandem::cli
