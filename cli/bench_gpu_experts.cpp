// Attaches a CUDA expert worker with a uniform placement of K experts to a bench session.
#include "cli/bench_gpu_experts.h"

#include <string>
#include <vector>

#include "engine/placement/planner.h"

#if defined(TANDEM_WITH_CUDA)
#include "engine/experts/cuda_expert_worker.h"
#endif

namespace tandem::cli {

Result<GpuExperts> attach_gpu_experts(ModelSession& session, int64_t k) {
  GpuExperts out;
  if (k <= 0) return out;
#if defined(TANDEM_WITH_CUDA)
  const model::ModelSpec& spec = *session.checkpoint.spec;
  const model::ModelWeights& weights = *session.checkpoint.weights;
  std::vector<uint32_t> layers;
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    if (weights.layers[l].moe) layers.push_back(static_cast<uint32_t>(l));
  }
  placement::PlanRequest request;
  request.policy = config::PlacementPolicy::kUniform;
  request.num_gpu_experts = k;
  TANDEM_ASSIGN_OR_RETURN(
      placement::Placement plan,
      placement::plan_placement(request, layers, spec.n_experts, nullptr, nullptr));
  experts::ExpertMap map = experts::ExpertMap::uniform(weights.layers.size(), spec.n_experts, 0);
  for (const auto& [layer, expert] : plan.map.gpu_experts()) map.set(layer, expert, 1);
  experts::CudaExpertWorker::Options options;
  options.worker = 1;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<experts::CudaExpertWorker> gpu,
                          experts::CudaExpertWorker::create(spec, weights, map, options));
  out.n_experts = gpu->n_experts_held();
  out.device_bytes = gpu->device_bytes();
  TANDEM_RETURN_IF_ERROR(
      session.runner->set_expert_workers({&session.runner->cpu_worker(), gpu.get()}, map));
  out.worker = std::move(gpu);
  return out;
#else
  (void)session;
  return unimplemented_error("--gpu-experts " + std::to_string(k) +
                             ": this tandem was built without CUDA (configure with "
                             "-DTANDEM_CUDA=ON on a machine with nvcc)");
#endif
}

}  // namespace tandem::cli
