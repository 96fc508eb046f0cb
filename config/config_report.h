// Text renderings of the configuration: the resolved values with their sources
// (--print-config), the Markdown reference of every key (--config-reference,
// docs/configuration.md) and the short startup summary. Pure functions, thread-safe.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "config/config_loader.h"

namespace tandem::config {

// YAML of every key, each line ending in "# <source>" ("default", "tandem.yaml:12",
// "env TANDEM_SERVER_PORT", "flag --server.port"). Secret values print as "<redacted>".
// Apart from redacted secrets, the output loads back to the same Config.
std::string render_resolved_config(const LoadedConfig& loaded);

// The Markdown reference of every section and key: type, range or choices, default, environment
// variable, flag and documentation. docs/configuration.md is exactly this text.
std::string render_config_reference();

// A few human lines (one per section) for the startup log; never includes secrets.
std::vector<std::string> config_summary_lines(const Config& config);

}  // namespace tandem::config
