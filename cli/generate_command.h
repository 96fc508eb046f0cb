// `tandem generate`: the testable core (arguments in, streamed text out, exit code back).
#pragma once

#include <ostream>
#include <span>
#include <string>

namespace tandem::cli {

// Runs `tandem generate` with `args` (the arguments after "generate"). Generated text is written
// to `out` as it is released, with a flush per token; with --json one object is written at the
// end instead. Diagnostics go to `err`. Returns the exit code: 0 generated (whatever the finish
// reason), 2 usage error, bad sampling parameter, unreadable model or prompt, 1 a forward pass or
// sampling failure. Main thread only; opens and closes the model itself.
int generate_main(std::span<const std::string> args, std::ostream& out, std::ostream& err);

}  // namespace tandem::cli
