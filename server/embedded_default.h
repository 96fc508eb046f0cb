// The embedded default model: the demo model the repository ships (models/demo/, see
// docs/demo-model.md), served when the configuration names no model.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "config/config.h"

namespace tandem::server {

// Where the demo model's folder is looked for, in order: $TANDEM_DATA_DIR/models/demo,
// <directory of the executable>/../share/tandem/models/demo (an installed tandemd), and the
// source tree tandemd was built from.
std::vector<std::string> embedded_model_dirs(const std::string& executable_path);

// When config.model.path is empty: sets it to the demo model's Q8_0 GGUF, and, when they are
// empty too, model.tokenizer_dir to its Hugging Face directory (trained tokenizer and ChatML
// template) and placement.stats_path to its shipped activation statistics. Returns the folder
// used, or "" when a model was configured (nothing changed). NOT_FOUND listing the places looked
// when no demo model is found.
Result<std::string> apply_embedded_default(config::Config& config,
                                           const std::string& executable_path);

}  // namespace tandem::server
