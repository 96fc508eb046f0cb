// The table of `tandem` subcommands. Add a line here for each *_command.cpp.
#include "cli/commands.h"

#include <array>

namespace tandem::cli {

namespace {
constexpr std::array kCommands = {
    Command{"version", "print the version, build options and CPU features", run_version},
    Command{"inspect", "list a checkpoint's architecture, tensors and sizes", run_inspect},
    Command{"tokenize", "print the token ids of a text with a GGUF's tokenizer", run_tokenize},
    Command{"detokenize", "print the text of token ids with a GGUF's tokenizer", run_detokenize},
};
}  // namespace

std::span<const Command> commands() {
  return kCommands;
}

}  // namespace tandem::cli
