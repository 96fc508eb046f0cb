// parse_flags: the one argument splitter shared by the subcommands.
#include "cli/flag_parser.h"

#include <algorithm>

namespace tandem::cli {

namespace {
bool listed(std::span<const std::string_view> names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}
}  // namespace

Result<ParsedFlags> parse_flags(std::span<const std::string> args,
                                std::span<const std::string_view> with_value,
                                std::span<const std::string_view> switches) {
  ParsedFlags parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    std::string value;
    bool has_value = false;
    if (const size_t eq = name.find('='); name.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
      has_value = true;
    }
    if (name == "-h" || name == "--help") {
      parsed.help = true;
      return parsed;
    }
    if (listed(switches, name)) {
      if (has_value) return invalid_argument_error(name + " takes no value");
      parsed.flags.push_back({std::move(name), ""});
      continue;
    }
    if (!listed(with_value, name)) {
      return invalid_argument_error("unknown argument \"" + args[i] + "\"");
    }
    if (!has_value) {
      if (i + 1 >= args.size()) return invalid_argument_error(name + " needs a value");
      value = args[++i];
    }
    parsed.flags.push_back({std::move(name), std::move(value)});
  }
  return parsed;
}

}  // namespace tandem::cli
