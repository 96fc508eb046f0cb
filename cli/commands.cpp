// The table of `tandem` subcommands. Add a line here for each *_command.cpp.
#include "cli/commands.h"

#include <array>

namespace tandem::cli {

namespace {
constexpr std::array kCommands = {
    Command{"version", "print the version, build options and CPU features", run_version},
};
}  // namespace

std::span<const Command> commands() {
  return kCommands;
}

}  // namespace tandem::cli
