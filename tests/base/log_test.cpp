// Tests of the logging set-up: level parsing and JSON lines that stay valid JSON.
#include "base/log.h"

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tandem {
namespace {

TEST_CASE("configure_logging accepts every spdlog level and rejects others", "[base]") {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    INFO(level);
    CHECK(configure_logging(level, LogFormat::kText).ok());
  }
  const Status bad = configure_logging("verbose", LogFormat::kText);
  CHECK(bad.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad.message(), Catch::Contains("verbose"));
}

TEST_CASE("JSON log lines escape quotes, backslashes and control characters", "[base]") {
  REQUIRE(configure_logging("info", LogFormat::kJson).ok());
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  auto logger = spdlog::default_logger();
  logger->sinks().push_back(sink);
  // The global formatter was set before the sink was added; give the new sink the same one.
  REQUIRE(configure_logging("info", LogFormat::kJson).ok());
  spdlog::info("path \"C:\\x\"\n\ttab \x01");
  logger->flush();
  logger->sinks().pop_back();
  const std::string line = out.str();
  REQUIRE_FALSE(line.empty());
  const nlohmann::json j = nlohmann::json::parse(line);
  CHECK(j.at("level") == "info");
  CHECK(j.at("msg") == "path \"C:\\x\"\n\ttab \x01");
  REQUIRE(configure_logging("info", LogFormat::kText).ok());
}

}  // namespace
}  // namespace tandem
