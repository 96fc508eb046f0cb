// Shared set-up for the `tandem` subcommands that run a model (logits, generate, bench, profile):
// the engine (engine/facade) built as tandemd builds it, run directly instead of served; a
// tokenizer; --prompt-ids lists.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/facade/engine.h"
#include "engine/model/model.h"
#include "engine/runtime/runtime.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/cpu/kv_type.h"

namespace tandem::cli {

// What a command asks of its engine besides the model.
struct SessionOptions {
  int threads = 0;          // forward threads (0 = all cores)
  int64_t gpu_experts = 0;  // experts placed on the GPU, evenly over the MoE layers (uniform)
  bool dense_gpu = false;   // the dense parts and the KV cache on the GPU (or fail)
  // The most tokens of one forward pass (GPU scratch is sized for it).
  int64_t max_batch_tokens = 2048;
  kernels::KvType kv_cache_type = kernels::kDefaultKvCacheType;  // runtime.kv_cache_type
  // Keep the checkpoint bytes start-up repacked (EngineOptions::free_copied_sources = false), for
  // a second expert worker built from them afterwards.
  bool keep_copied_sources = false;
};

// The engine a command runs directly (its scheduler never starts). Owned by one command on the
// main thread.
struct ModelSession {
  std::unique_ptr<engine::Engine> engine;

  const model::Checkpoint& checkpoint() const { return engine->checkpoint(); }
  runtime::ModelRunner& runner() const { return engine->runner(); }
};

// The engine's options for `path` (GGUF file or HF directory) as the commands run it: no
// statistics (uniform placement of options.gpu_experts), no tokenizer, no file watch,
// dense parts on the CPU unless options.dense_gpu.
engine::EngineOptions session_engine_options(const std::string& path,
                                             const SessionOptions& options);

// Opens `path` with session_engine_options. Errors: Engine::create's.
Result<std::unique_ptr<ModelSession>> open_session(const std::string& path,
                                                   const SessionOptions& options);
inline Result<std::unique_ptr<ModelSession>> open_session(const std::string& path, int threads) {
  return open_session(path, SessionOptions{.threads = threads});
}

// The tokenizer of `path`: a GGUF file's tokenizer.ggml.* metadata, or a Hugging Face directory's
// tokenizer.json (+ tokenizer_config.json). NOT_FOUND when `path` is a directory without
// tokenizer.json; the loader's error otherwise.
Result<tokenizer::Tokenizer> load_tokenizer(const std::string& path);

// "1 2 3" or "1,2,3" -> ids. INVALID_ARGUMENT for anything that is not a list of non-negative
// integers, or an empty list.
Result<std::vector<int32_t>> parse_token_ids(const std::string& text);

// Parses a non-negative int flag value; INVALID_ARGUMENT naming the flag otherwise.
Result<int> parse_count(const char* flag, const std::string& text);

// Parses --kv-cache-type's value (f32, f16); INVALID_ARGUMENT naming the flag and the choices.
Result<kernels::KvType> parse_kv_cache_type(const std::string& text);

}  // namespace tandem::cli
