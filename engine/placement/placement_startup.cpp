// Placement at startup: statistics file -> planner -> report, with the missing-file fallback.
#include "engine/placement/placement_startup.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include <spdlog/spdlog.h>

#include "engine/placement/model_identity.h"
#include "engine/placement/stats_file.h"

namespace tandem::placement {

Result<StartupPlacement> plan_startup_placement(const StartupPlacementOptions& options,
                                                const model::Checkpoint& checkpoint,
                                                const GpuBudget& gpu) {
  TANDEM_ASSIGN_OR_RETURN(ModelIdentity identity, model_identity(checkpoint));
  TANDEM_ASSIGN_OR_RETURN(ExpertSizes sizes, expert_sizes(checkpoint));

  StartupPlacement result;
  std::optional<ExpertTable> table;
  if (!options.stats_path.empty()) {
    std::error_code ec;
    const bool exists = std::filesystem::exists(options.stats_path, ec);
    if (!exists && !ec) {
      const std::string warning =
          "statistics file " + options.stats_path +
          " not found; planning without statistics (run `tandem profile` to make one)";
      spdlog::warn("{}", warning);
      result.warnings.push_back(warning);
    } else {
      TANDEM_ASSIGN_OR_RETURN(StatsInput input, read_stats_input(options.stats_path));
      Result<ExpertTable> fitted = conform_to_model(input, identity);
      if (!fitted.ok()) {
        return Status(fitted.status().code(),
                      options.stats_path + ": " + fitted.status().message());
      }
      table = std::move(fitted).value();
      result.stats = std::move(input.stats);
      result.stats_loaded = true;
    }
  }

  PlanRequest request;
  request.policy = options.policy;
  request.num_gpu_experts = options.num_gpu_experts;
  if (options.policy == PlacementPolicy::kBudget) {
    if (gpu.usable == 0) {
      return invalid_argument_error(
          "placement.policy budget needs GPU memory to fill: a CUDA device (its free memory is "
          "the budget) or placement.gpu_memory_budget");
    }
    request.gpu_memory_budget = gpu.usable;
    request.gpu_reserved_bytes = gpu.reserved;
  }
  const ExpertTable* stats = table ? &*table : nullptr;
  TANDEM_ASSIGN_OR_RETURN(result.placement, plan_placement(request, identity.moe_layer_ids(),
                                                           identity.n_experts, stats, &sizes));
  result.report = make_report(result.placement, stats, &sizes);
  for (const std::string& w : result.placement.warnings) result.warnings.push_back(w);
  result.report.warnings = result.warnings;
  return result;
}

}  // namespace tandem::placement
