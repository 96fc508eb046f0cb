// `tandem plan`: the testable core (arguments in, text out, exit code back).
#pragma once

#include <span>
#include <string>

namespace tandem::cli {

// Runs `tandem plan` with `args` (the arguments after "plan"), writing what it would print to
// `out` and `err`. Returns the exit code: 0 planned, 2 usage error or bad input (unreadable or
// malformed statistics, statistics for another model, an unrunnable model), 1 other failures
// (the heat map cannot be written). Blocking file I/O; call from one thread.
int plan_main(std::span<const std::string> args, std::string& out, std::string& err);

}  // namespace tandem::cli
