// Internal to config/: applies a YAML configuration file onto a Config.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "config/config_loader.h"

namespace tandem::config::internal {

// Reads `path` and applies every key it sets to `config`, recording "path:line" in `sources`
// (indexed like config_fields()). Problems are appended to `errors`, one line each, already
// naming the file, line and key. `file_unreadable` is set when the file itself could not be read
// (missing, a directory, no permission).
void apply_yaml_file(const std::string& path, Config& config, std::vector<ValueSource>& sources,
                     std::vector<std::string>& errors, bool& file_unreadable);

}  // namespace tandem::config::internal
