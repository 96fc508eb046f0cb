// `tandem inspect`: the testable core (arguments in, text out, exit code back).
#pragma once

#include <span>
#include <string>

namespace tandem::cli {

// Runs `tandem inspect` with `args` (the arguments after "inspect"), writing what it would print
// to `out` and `err`. Returns the exit code: 0 listed (including well-formed files that are not
// runnable models), 2 usage error, unreadable, malformed or inconsistent checkpoint.
int inspect_main(std::span<const std::string> args, std::string& out, std::string& err);

}  // namespace tandem::cli
