// tandemd's command line: what to do (run, --help, --version, --print-config,
// --config-reference), the --config file and the --section.key overrides. Parsing only; nothing
// here reads files or the environment. Thread-safe (pure functions).
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "config/config_loader.h"

namespace tandem::server {

enum class DaemonAction {
  kRun,              // Load the configuration and start.
  kHelp,             // --help: print daemon_usage(), exit 0.
  kVersion,          // --version: print the version, exit 0.
  kPrintConfig,      // --print-config: load, print the resolved configuration, exit 0.
  kConfigReference,  // --config-reference: print the Markdown reference of every key, exit 0.
};

struct DaemonOptions {
  DaemonAction action = DaemonAction::kRun;
  std::string config_file;  // --config FILE; empty = none.
  std::vector<config::FlagOverride> overrides;
};

// Parses the arguments after the program name. --help wins over --version, which wins over
// --config-reference, which wins over --print-config. "--config FILE", "--config=FILE",
// "--section.key=value" and "--section.key value" are accepted; whether a section.key exists is
// checked later by config::load_config(). An unknown flag or a stray argument is an
// INVALID_ARGUMENT naming it (with the nearest flag suggested).
Result<DaemonOptions> parse_daemon_options(std::span<const std::string> args);

// The --help text.
std::string daemon_usage();

// name -> value for "NAME=VALUE" entries of a null-terminated environment block (environ).
std::map<std::string, std::string> environment_snapshot(char* const* envp);

}  // namespace tandem::server
