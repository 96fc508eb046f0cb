// PlacementReport: what a placement puts where, its bytes and its expected GPU hit rate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/placement/expert_table.h"
#include "engine/placement/placement_policy.h"
#include "engine/placement/planner.h"

namespace tandem::placement {

struct LayerPlacement {
  uint32_t layer = 0;                 // model layer index
  std::vector<uint32_t> gpu_experts;  // ascending
  uint64_t gpu_bytes = 0;             // device bytes; 0 when sizes are unknown
  double activations = 0;             // recorded activations of this layer (0 without stats)
  double covered = 0;                 // of which by GPU experts
};

// A plain value built once after planning; any thread may read it.
struct PlacementReport {
  PlacementPolicy requested = PlacementPolicy::kFrequency;
  PlacementPolicy used = PlacementPolicy::kFrequency;
  bool fell_back_to_uniform = false;
  std::vector<std::string> warnings;
  uint64_t n_experts = 0;  // per layer
  uint64_t n_gpu_experts = 0;
  uint64_t n_total_experts = 0;
  std::vector<LayerPlacement> layers;
  bool has_sizes = false;
  uint64_t gpu_expert_bytes = 0;  // as the GPU expert worker allocates them (device_bytes)
  uint64_t cpu_expert_bytes = 0;  // experts not on the GPU, as stored
  uint64_t expert_budget_bytes = 0;
  // Share of recorded activations that GPU experts cover (the expected GPU hit rate); empty
  // without statistics, 0 when the statistics are all zero.
  std::optional<double> coverage;
};

// `stats` and `sizes` may be null; when given they have the placement's shape.
PlacementReport make_report(const Placement& placement, const ExpertTable* stats,
                            const ExpertSizes* sizes);

// A fixed-width text table: one line per layer (GPU experts, bytes, coverage), then totals.
// For the startup log and `tandem plan`.
std::string format_report_table(const PlacementReport& report);

// {"policy", "policy_used", "fell_back_to_uniform", "warnings", "n_gpu_experts",
//  "n_total_experts", "gpu_experts": [[layer, expert], ...] ascending, "coverage" (or null),
//  "layers": [{"layer", "n_gpu_experts", "gpu_experts", "gpu_bytes", "coverage"}],
//  "gpu_expert_bytes", "cpu_expert_bytes" (null without sizes), "expert_budget_bytes"}.
nlohmann::json report_json(const PlacementReport& report);

}  // namespace tandem::placement
