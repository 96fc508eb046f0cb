// tandemd's configuration turned into the engine's options, the configuration check that needs
// the model file, and the model facts GetModelInfo reports.
#pragma once

#include <string>

#include "base/status.h"
#include "config/config.h"
#include "engine/facade/engine.h"
#include "server/serving_context.h"

namespace tandem::server {

// model.*, placement.*, runtime.* and the server's request bounds as EngineOptions (the
// tokenizer export directory under $TMPDIR, or /tmp). Reads only the environment's TMPDIR.
engine::EngineOptions engine_options(const config::Config& config);

// model.format against what `path` is (detect_checkpoint_format: GGUF magic, or a directory /
// safetensors file): OK for auto or a match; INVALID_ARGUMENT naming the key, the configured and
// the detected format and the path otherwise; the detector's error for a missing path.
// Blocking I/O (reads 4 bytes).
Status check_model_format(config::ModelFormat configured, const std::string& path);

// The facts GetModelInfo reports: the engine's, and the name clients put in "model"
// (model.served_name, else the file's stem or the directory's name).
ServedModelInfo served_model_info(const config::Config& config, const engine::Engine& engine);

// The exit code of a failure of Engine::create at `stage` (exit_codes.h): a device failure may
// pass on a restart (kExitFailure); the model's inputs and the engine's build as
// startup_exit_code says.
int engine_exit_code(const Status& status, engine::EngineStage stage);

}  // namespace tandem::server
