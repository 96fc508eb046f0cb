// `tandem profile`: the testable core (arguments in, text out, exit code back).
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace tandem::cli {

// Where progress goes while prompts run. `tty` true: `write` gets a redrawn bar ("\r[####  ]
// ..."), false: one line per 10% of the prompts. Called on the thread that runs profile_main.
struct ProfileProgress {
  std::function<void(std::string_view)> write;
  bool tty = false;
};

// Runs `tandem profile` with `args` (the arguments after "profile"): tokenizes every prompt of
// --prompts, runs each through the model (prefill, then up to --max-tokens-per-prompt greedy
// tokens), records the router's selections and writes the statistics file. Writes the summary to
// `out` and messages to `err`; progress goes to `progress` (to `err`, one line per 10%, when
// `progress.write` is empty). Returns 0 on success, 2 for usage errors and bad input (unreadable
// or malformed prompts, an unrunnable model, --merge into statistics of another model), 1 when
// the statistics cannot be written. Blocking; call from one thread.
int profile_main(std::span<const std::string> args, std::string& out, std::string& err,
                 const ProfileProgress& progress = {});

}  // namespace tandem::cli
