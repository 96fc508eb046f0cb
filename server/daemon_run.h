// run_daemon: tandemd after its configuration was accepted — listen, load, serve, drain, exit.
#pragma once

#include <string>

#include "config/config.h"

namespace tandem::server {

// Exit codes: 0 after a graceful shutdown, 1 when the start fails after the configuration was
// accepted (model unreadable, port in use, ...) or a second signal cut the drain short. Blocks
// until shutdown. Call from main once, after ShutdownSignals::install().
int run_daemon(config::Config config, const std::string& executable_path);

}  // namespace tandem::server
