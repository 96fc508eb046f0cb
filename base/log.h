// Process-wide logging set-up over spdlog: level and text/JSON format. Call once from main().
#pragma once

#include <string_view>

#include "base/status.h"

namespace tandem {

enum class LogFormat { kText, kJson };

// Parses "trace", "debug", "info", "warn", "error", "critical", "off".
// Installs the default logger (stderr) with the given level and format. Not thread-safe: call
// before other threads start.
Status configure_logging(std::string_view level, LogFormat format);

}  // namespace tandem
