// tandemd's exit codes (docs/deployment.md, "Signals, exit codes, health"), and which start-up
// failures are permanent.
#pragma once

#include "base/status.h"

namespace tandem::server {

// A clean stop (a drain that finished, or a signal while starting).
inline constexpr int kExitOk = 0;
// A failure a restart may cure (a port in use, out of memory, an I/O or device error), or a drain
// cut short by a second signal.
inline constexpr int kExitFailure = 1;
// A bad command line or configuration (including files the configuration names that cannot be
// used, such as an unwritable placement.stats_output_path directory): restarting cannot help.
inline constexpr int kExitBadConfig = 2;
// The model cannot be served as configured: a corrupt, truncated or unsupported checkpoint,
// statistics of another model, a tokenizer that does not load, a context_length above the
// model's: restarting cannot help until the files or the configuration change.
inline constexpr int kExitBadModel = 3;

// Where tandemd's start failed.
enum class StartupStage {
  kCheckpoint,  // opening the model files, planning the placement, the statistics
  kEngine,      // tokenizer, runner, KV cache, scheduler, GPU copies
};

// The exit code of a failure while opening or starting the model: kExitFailure for UNKNOWN,
// CANCELLED, DEADLINE_EXCEEDED, ABORTED, INTERNAL and UNAVAILABLE, and for RESOURCE_EXHAUSTED in
// the engine stage (memory); kExitBadModel for every other code, which describes the input (in the
// checkpoint stage RESOURCE_EXHAUSTED is a file over a reader's limit). Pure.
int startup_exit_code(const Status& status, StartupStage stage);

}  // namespace tandem::server
