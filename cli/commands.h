// The entry points of the `tandem` subcommands, one per *_command.cpp file.
#pragma once

#include <span>

#include "cli/command.h"

namespace tandem::cli {

int run_version(std::span<char*> args);
int run_inspect(std::span<char*> args);
int run_tokenize(std::span<char*> args);
int run_detokenize(std::span<char*> args);
int run_export_tokenizer(std::span<char*> args);
int run_logits(std::span<char*> args);
int run_generate(std::span<char*> args);
int run_bench(std::span<char*> args);
int run_plan(std::span<char*> args);
int run_profile(std::span<char*> args);

}  // namespace tandem::cli
