// tandemd: the Tandem daemon's entry point (command line -> configuration -> start).
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "base/log.h"
#include "config/config_loader.h"
#include "config/config_report.h"
#include "kernels/cpu/matmul_dispatch.h"
#include "server/daemon_options.h"
#include "server/daemon_run.h"
#include "server/exit_codes.h"
#include "server/grpc_core_log.h"
#include "server/shutdown_signals.h"
#include "server/startup_banner.h"

namespace {

using tandem::server::kExitBadConfig;

// The first code of the process: the dynamic loader runs .preinit_array entries after relocation
// and before any shared library's or this program's constructors. From here on a SIGTERM or
// SIGINT sent while tandemd starts stays pending (and is handled once main installs the watcher)
// instead of killing the process. Only the loader's own work before this point (mapping and
// relocating the shared libraries, a few milliseconds) remains unguarded. Exit codes:
// server/exit_codes.h.
void block_shutdown_signals_early(int, char**, char**) {
  tandem::server::ShutdownSignals::block_in_this_thread();
}
[[gnu::section(".preinit_array"),
  gnu::used]] void (*const kBlockShutdownSignalsEarly)(int, char**,
                                                       char**) = &block_shutdown_signals_early;

}  // namespace

int main(int argc, char** argv) {
  using namespace tandem;
  // The watcher thread first: a signal during the command line and configuration steps exits 0.
  server::ShutdownSignals::install();
  const std::vector<std::string> args(argv + 1, argv + argc);
  const Result<server::DaemonOptions> options = server::parse_daemon_options(args);
  if (!options.ok()) {
    std::fprintf(stderr, "tandemd: %s\nRun 'tandemd --help' for usage.\n",
                 options.status().message().c_str());
    return kExitBadConfig;
  }
  switch (options->action) {
    case server::DaemonAction::kHelp:
      std::fputs(server::daemon_usage().c_str(), stdout);
      return 0;
    case server::DaemonAction::kVersion:
      for (const std::string& line : server::build_banner_lines()) std::puts(line.c_str());
      return 0;
    case server::DaemonAction::kConfigReference:
      std::fputs(config::render_config_reference().c_str(), stdout);
      return 0;
    case server::DaemonAction::kPrintConfig:
    case server::DaemonAction::kRun:
      break;
  }

  const config::ConfigSources sources{options->config_file, server::environment_snapshot(environ),
                                      options->overrides};
  const Result<config::LoadedConfig> loaded = config::load_config(sources);
  if (!loaded.ok()) {
    std::fprintf(stderr, "tandemd: invalid configuration:\n%s\n",
                 loaded.status().message().c_str());
    return kExitBadConfig;
  }
  if (options->action == server::DaemonAction::kPrintConfig) {
    std::fputs(config::render_resolved_config(*loaded).c_str(), stdout);
    return 0;
  }

  const config::LoggingConfig& logging = loaded->config.logging;
  const Status logging_status = configure_logging(config::enum_name(logging.level), logging.format);
  if (!logging_status.ok()) {
    std::fprintf(stderr, "tandemd: %s\n", logging_status.to_string().c_str());
    return kExitBadConfig;
  }
  server::route_grpc_core_logs();
  // Process-wide, before the banner names it and before any matmul runs.
  kernels::select_matmul_kernels(config::enum_name(loaded->config.runtime.cpu_kernels),
                                 "runtime.cpu_kernels");
  server::log_startup_banner();
  for (const std::string& line : config::config_summary_lines(loaded->config)) {
    spdlog::info("config: {}", line);
  }
  return server::run_daemon(loaded->config, "/proc/self/exe");
}
