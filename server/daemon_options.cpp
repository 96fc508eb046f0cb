// Parsing of tandemd's command line into a DaemonOptions.
#include "server/daemon_options.h"

#include <string_view>

#include "config/config_fields.h"
#include "config/value_text.h"

namespace tandem::server {

namespace {

struct ModeFlag {
  std::string_view name;
  DaemonAction action;
};

// In decreasing priority when several are given.
constexpr ModeFlag kModeFlags[] = {
    {"--help", DaemonAction::kHelp},
    {"--version", DaemonAction::kVersion},
    {"--config-reference", DaemonAction::kConfigReference},
    {"--print-config", DaemonAction::kPrintConfig},
};

std::string unknown_flag_message(std::string_view flag) {
  std::vector<std::string> known = {"--config"};
  for (const ModeFlag& m : kModeFlags) known.emplace_back(m.name);
  for (const config::FieldDescriptor& f : config::config_fields()) known.push_back(f.flag_name());
  const std::string suggestion = config::nearest_spelling(flag, known);
  return "unknown flag '" + std::string(flag) + "'" +
         (suggestion.empty() ? std::string() : " (did you mean " + suggestion + "?)");
}

}  // namespace

Result<DaemonOptions> parse_daemon_options(std::span<const std::string> args) {
  DaemonOptions options;
  size_t best_mode = std::size(kModeFlags);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!arg.starts_with("--")) {
      return invalid_argument_error("unexpected argument '" + arg +
                                    "' (settings are --section.key=value)");
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const bool has_inline_value = eq != std::string::npos;
    // The value of a flag that takes one: after '=' or the next argument.
    const auto take_value = [&]() -> Result<std::string> {
      if (has_inline_value) return arg.substr(eq + 1);
      if (i + 1 >= args.size()) return invalid_argument_error("flag " + name + " needs a value");
      return args[++i];
    };

    bool is_mode = false;
    for (size_t m = 0; m < std::size(kModeFlags); ++m) {
      if (name != kModeFlags[m].name) continue;
      if (has_inline_value) {
        return invalid_argument_error("flag " + name + " takes no value");
      }
      best_mode = std::min(best_mode, m);
      is_mode = true;
    }
    if (is_mode) continue;

    if (name == "--config") {
      TANDEM_ASSIGN_OR_RETURN(options.config_file, take_value());
      if (options.config_file.empty()) {
        return invalid_argument_error("flag --config needs a file name");
      }
    } else if (name.find('.') != std::string::npos && name.size() > 2) {
      TANDEM_ASSIGN_OR_RETURN(std::string value, take_value());
      options.overrides.push_back(config::FlagOverride{name.substr(2), std::move(value)});
    } else {
      return invalid_argument_error(unknown_flag_message(name));
    }
  }
  if (best_mode < std::size(kModeFlags)) options.action = kModeFlags[best_mode].action;
  return options;
}

std::string daemon_usage() {
  return R"(Usage: tandemd [--config FILE] [--section.key=VALUE ...] [--print-config]
       tandemd --config-reference | --help | --version

tandemd serves a Mixture-of-Experts model over gRPC, with part of the experts on the GPU.

Options:
  --config FILE         read settings from a YAML file (see config/tandem.yaml)
  --section.key=VALUE   set one key, e.g. --server.port=8080 (also: --section.key VALUE)
  --print-config        print the resolved configuration with the source of each value, exit
  --config-reference    print the Markdown reference of every key, exit
  --help                print this help, exit
  --version             print the version and build, exit

Settings come from defaults < the YAML file < TANDEM_<SECTION>_<KEY> environment variables
< flags. See docs/configuration.md.

Exit codes: 0 for --help/--version/--print-config/--config-reference, 2 for a bad command line or
configuration, 1 for a failure after the configuration was accepted.
)";
}

std::map<std::string, std::string> environment_snapshot(char* const* envp) {
  std::map<std::string, std::string> env;
  if (envp == nullptr) return env;
  for (char* const* p = envp; *p != nullptr; ++p) {
    const std::string_view entry(*p);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return env;
}

}  // namespace tandem::server
