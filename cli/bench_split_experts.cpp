// Attaches a second CPU expert worker with its own pool, holding a uniform placement of K experts,
// to a bench session.
#include "cli/bench_split_experts.h"

#include <algorithm>
#include <string>
#include <vector>

#include "engine/experts/experts.h"
#include "engine/placement/planner.h"

namespace tandem::cli {

namespace {

// K experts planned with the uniform policy go to worker 1, the rest to worker 0 (as the engine
// places `--gpu-experts K` without statistics).
Result<experts::ExpertMap> uniform_split_map(const ModelSession& session, int64_t k) {
  const model::ModelSpec& spec = *session.checkpoint().spec;
  const model::ModelWeights& weights = *session.checkpoint().weights;
  std::vector<uint32_t> layers;
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    if (weights.layers[l].moe) layers.push_back(static_cast<uint32_t>(l));
  }
  placement::PlanRequest request;
  request.policy = placement::PlacementPolicy::kUniform;
  request.num_gpu_experts = k;
  TANDEM_ASSIGN_OR_RETURN(
      placement::Placement plan,
      placement::plan_placement(request, layers, spec.n_experts, nullptr, nullptr));
  experts::ExpertMap map = experts::ExpertMap::uniform(weights.layers.size(), spec.n_experts, 0);
  for (const auto& [layer, expert] : plan.map.gpu_experts()) map.set(layer, expert, 1);
  return map;
}

}  // namespace

Result<SplitCpuExperts> attach_split_cpu_experts(ModelSession& session, int64_t k, int threads) {
  SplitCpuExperts out;
  if (k <= 0) return out;
  TANDEM_ASSIGN_OR_RETURN(experts::ExpertMap map, uniform_split_map(session, k));
  out.pool = std::make_unique<ThreadPool>(std::max(1, threads));
  // The same activation mode as the runner's own CPU worker (RunnerOptions' default, kQ8_0), so
  // the split changes no result.
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<experts::CpuExpertWorker> cpu,
      experts::CpuExpertWorker::create(*session.checkpoint().spec, *session.checkpoint().weights,
                                       out.pool.get(), kernels::MatmulActivations::kQuantized));
  for (size_t l = 0; l < map.n_layers(); ++l) {
    for (uint8_t w : map.layer(l)) out.n_experts += w == 1 ? 1 : 0;
  }
  TANDEM_RETURN_IF_ERROR(
      session.runner().set_expert_workers({&session.runner().cpu_worker(), cpu.get()}, map));
  out.worker = std::move(cpu);
  return out;
}

}  // namespace tandem::cli
