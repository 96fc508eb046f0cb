// Placement at startup: load the configured statistics, plan, and report (for the daemon).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/model/checkpoint.h"
#include "engine/placement/activation_stats.h"
#include "engine/placement/expert_sizes.h"
#include "engine/placement/placement_report.h"
#include "engine/placement/planner.h"

namespace tandem::placement {

// GPU bytes for the budget policy: what tandemd may use on the device in all (free memory less
// headroom, capped by placement.gpu_memory_budget; see gpu_memory_plan.h) and what it must hold
// whatever the expert count (GpuMemoryDemand::fixed()).
struct GpuBudget {
  uint64_t usable = 0;
  uint64_t reserved = 0;
};

// How to place experts at start (tandemd's placement.* settings, less the output file).
struct StartupPlacementOptions {
  PlacementPolicy policy = PlacementPolicy::kFrequency;
  int64_t num_gpu_experts = 0;  // frequency / uniform
  std::string stats_path;       // "" = no statistics
};

// What the daemon needs to place experts when it starts. A plain value; any thread may read it.
struct StartupPlacement {
  Placement placement;
  PlacementReport report;
  // The statistics the plan used: a Tandem file's contents (so that the daemon can keep
  // counting on top of them), empty for a plain table or without statistics.
  std::optional<ActivationStats> stats;
  bool stats_loaded = false;          // a statistics input (file or table) was used
  std::vector<std::string> warnings;  // the planner's, plus e.g. "statistics file X not found"
};

// Plans the placement for `checkpoint` (a runnable model: spec and weights bound) from the
// options:
// - stats_path empty: no statistics (frequency becomes uniform, with the planner's warning).
// - stats_path names a missing file: the same, plus a warning naming the file (first start,
//   before any profiling).
// - stats_path names a file: read it (a Tandem statistics file or a plain table, as `tandem
//   plan` reads them) and fit it to the model; a malformed file or statistics for another model
//   is an error (INVALID_ARGUMENT / FAILED_PRECONDITION, message prefixed with the path): the
//   daemon refuses to start rather than plan from the wrong numbers.
// - budget: gpu.usable minus gpu.reserved goes to experts; INVALID_ARGUMENT when gpu.usable is 0
//   (no device and no placement.gpu_memory_budget).
// FAILED_PRECONDITION when the checkpoint is not runnable. Blocking file I/O; call from the
// thread that starts the daemon. Warnings are also logged (spdlog::warn).
Result<StartupPlacement> plan_startup_placement(const StartupPlacementOptions& options,
                                                const model::Checkpoint& checkpoint,
                                                const GpuBudget& gpu = {});

}  // namespace tandem::placement
