// Tests of tandemd's command-line parsing (server/daemon_options.h).
#include "server/daemon_options.h"

#include <catch2/catch.hpp>

namespace tandem::server {
namespace {

Result<DaemonOptions> parse(std::vector<std::string> args) {
  return parse_daemon_options(args);
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST_CASE("no arguments means run with defaults", "[config]") {
  const Result<DaemonOptions> r = parse({});
  REQUIRE(r.ok());
  CHECK(r->action == DaemonAction::kRun);
  CHECK(r->config_file.empty());
  CHECK(r->overrides.empty());
}

TEST_CASE("mode flags select the action, --help first", "[config]") {
  CHECK(parse({"--help"})->action == DaemonAction::kHelp);
  CHECK(parse({"--version"})->action == DaemonAction::kVersion);
  CHECK(parse({"--print-config"})->action == DaemonAction::kPrintConfig);
  CHECK(parse({"--config-reference"})->action == DaemonAction::kConfigReference);
  CHECK(parse({"--print-config", "--version"})->action == DaemonAction::kVersion);
  CHECK(parse({"--print-config", "--help", "--version"})->action == DaemonAction::kHelp);
  CHECK(parse({"--print-config", "--config-reference"})->action == DaemonAction::kConfigReference);
  CHECK_FALSE(parse({"--help=yes"}).ok());
}

TEST_CASE("the config file and overrides take '=value' or the next argument", "[config]") {
  const Result<DaemonOptions> r =
      parse({"--config", "a.yaml", "--server.port=8080", "--runtime.threads", "4",
             "--server.api_keys=k1=x,k2", "--print-config"});
  REQUIRE(r.ok());
  CHECK(r->action == DaemonAction::kPrintConfig);
  CHECK(r->config_file == "a.yaml");
  REQUIRE(r->overrides.size() == 3);
  CHECK(r->overrides[0].key == "server.port");
  CHECK(r->overrides[0].value == "8080");
  CHECK(r->overrides[1].key == "runtime.threads");
  CHECK(r->overrides[1].value == "4");
  CHECK(r->overrides[2].key == "server.api_keys");
  CHECK(r->overrides[2].value == "k1=x,k2");
  CHECK(parse({"--config=b.yaml"})->config_file == "b.yaml");
  CHECK(parse({"--model.path="})->overrides.at(0).value.empty());
}

TEST_CASE("bad command lines are errors that name the argument", "[config]") {
  CHECK(contains(parse({"--config"}).status().message(), "flag --config needs a value"));
  CHECK(contains(parse({"--config="}).status().message(), "--config needs a file name"));
  CHECK(contains(parse({"--server.port"}).status().message(), "--server.port needs a value"));
  CHECK(contains(parse({"serve"}).status().message(), "unexpected argument 'serve'"));
  CHECK(contains(parse({"--prnt-config"}).status().message(),
                 "unknown flag '--prnt-config' (did you mean --print-config?)"));
  CHECK(contains(parse({"--verbose"}).status().message(), "unknown flag '--verbose'"));
}

TEST_CASE("the usage text lists every flag", "[config]") {
  const std::string usage = daemon_usage();
  for (const char* flag : {"--config FILE", "--print-config", "--config-reference", "--help",
                           "--version", "--section.key=VALUE"}) {
    CHECK(contains(usage, flag));
  }
}

TEST_CASE("environment_snapshot splits NAME=VALUE at the first '='", "[config]") {
  char a[] = "TANDEM_SERVER_PORT=8080";
  char b[] = "X=a=b";
  char c[] = "NOEQUALS";
  char* envp[] = {a, b, c, nullptr};
  const std::map<std::string, std::string> env = environment_snapshot(envp);
  CHECK(env.size() == 2);
  CHECK(env.at("TANDEM_SERVER_PORT") == "8080");
  CHECK(env.at("X") == "a=b");
  CHECK(environment_snapshot(nullptr).empty());
}

}  // namespace
}  // namespace tandem::server
