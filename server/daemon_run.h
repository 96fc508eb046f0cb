// run_daemon: tandemd after its configuration was accepted — listen, load, serve, drain, exit.
#pragma once

#include <string>

#include "config/config.h"

namespace tandem::server {

// Exit codes (exit_codes.h): 0 after a graceful shutdown; 2 when a file the configuration names
// cannot be used (an unwritable placement.stats_output_path directory, an unreadable
// certificate); 3 when the model cannot be served as configured (corrupt or unsupported files,
// foreign statistics, model.context_length above the model's); 1 for the other start failures
// (port in use, out of memory, ...) and when a second signal cut the drain short. Blocks until
// shutdown. Call from main once, after ShutdownSignals::install().
int run_daemon(config::Config config, const std::string& executable_path);

}  // namespace tandem::server
