// Logging set-up: the stderr sink, the level and the text or JSON line pattern.
#include "base/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>
#include <string>

namespace tandem {

namespace {

// %* in a pattern: the message with JSON string escaping, so that every line is valid JSON.
class JsonEscapedMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string_view text(msg.payload.data(), msg.payload.size());
    for (const char c : text) {
      switch (c) {
        case '"':
          dest.append(std::string_view("\\\""));
          break;
        case '\\':
          dest.append(std::string_view("\\\\"));
          break;
        case '\n':
          dest.append(std::string_view("\\n"));
          break;
        case '\r':
          dest.append(std::string_view("\\r"));
          break;
        case '\t':
          dest.append(std::string_view("\\t"));
          break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
            dest.append(std::string_view(buf));
          } else {
            dest.push_back(c);
          }
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonEscapedMessage>();
  }
};

}  // namespace

Status configure_logging(std::string_view level, LogFormat format) {
  const spdlog::level::level_enum lvl = spdlog::level::from_str(std::string(level));
  // from_str maps anything unknown to "off"; only accept "off" when it was asked for.
  if (lvl == spdlog::level::off && level != "off") {
    return invalid_argument_error("unknown log level '" + std::string(level) +
                                  "' (expected trace, debug, info, warn, error, critical, off)");
  }
  auto logger = spdlog::get("tandem");
  if (!logger) logger = spdlog::stderr_color_mt("tandem");
  spdlog::set_default_logger(logger);
  spdlog::set_level(lvl);
  if (format == LogFormat::kJson) {
    auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    formatter->add_flag<JsonEscapedMessage>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","thread":%t,"msg":"%*"})");
    spdlog::set_formatter(std::move(formatter));
  } else {
    spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%-5l%$ %v");
  }
  return Status();
}

}  // namespace tandem
