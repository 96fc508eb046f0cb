// Splitting a subcommand's arguments into flags: "--name value", "--name=value" and switches.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace tandem::cli {

struct ParsedFlag {
  std::string name;   // "--stats"
  std::string value;  // empty for a switch
};

struct ParsedFlags {
  std::vector<ParsedFlag> flags;  // in command-line order
  bool help = false;              // -h or --help was given (parsing stops there)
};

// `with_value` lists the flags that take a value, `switches` those that take none. Errors
// (INVALID_ARGUMENT, message ready for the user): an unknown argument, a flag without its value,
// a value given to a switch.
Result<ParsedFlags> parse_flags(std::span<const std::string> args,
                                std::span<const std::string_view> with_value,
                                std::span<const std::string_view> switches);

}  // namespace tandem::cli
