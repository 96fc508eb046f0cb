// Command: one `tandem` subcommand (name, one-line summary, entry point).
#pragma once

#include <span>

namespace tandem::cli {

// run() receives the arguments after the subcommand name and returns the process exit code:
// 0 success, 2 bad input (usage, malformed file), 1 other failures.
struct Command {
  const char* name;
  const char* summary;
  int (*run)(std::span<char*> args);
};

// The table of subcommands, defined in commands.cpp.
std::span<const Command> commands();

}  // namespace tandem::cli
