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
    Command{"export-tokenizer", "write a GGUF's tokenizer as a Hugging Face tokenizer directory",
            run_export_tokenizer},
    Command{"logits", "write a prompt's logits at every position (float32)", run_logits},
    Command{"generate", "generate text from a prompt (greedy decoding)", run_generate},
    Command{"bench", "measure prefill and decode tokens per second", run_bench},
    Command{"plan", "plan which experts go on the GPU from activation statistics", run_plan},
    Command{"profile", "record which experts the router chooses on a prompts file", run_profile},
};
}  // namespace

std::span<const Command> commands() {
  return kCommands;
}

}  // namespace tandem::cli
