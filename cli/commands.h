// The entry points of the `tandem` subcommands, one per *_command.cpp file.
#pragma once

#include <span>

#include "cli/command.h"

namespace tandem::cli {

int run_version(std::span<char*> args);
int run_inspect(std::span<char*> args);
int run_tokenize(std::span<char*> args);
int run_detokenize(std::span<char*> args);

}  // namespace tandem::cli
