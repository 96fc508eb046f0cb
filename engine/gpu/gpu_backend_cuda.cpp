// The CUDA GPU backend: device listing, the CUDA expert worker and the CUDA dense executor.
#include <utility>

#include "engine/experts/cuda_expert_worker.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/runtime/cuda_dense_executor.h"
#include "kernels/cuda/device_info.h"

namespace tandem::gpu {

std::string_view backend_name() {
  return "CUDA";
}

Result<std::vector<DeviceInfo>> list_devices() {
  return kernels::cuda::list_devices();
}

Result<DeviceMemory> device_memory(int device) {
  return kernels::cuda::device_memory(device);
}

uint64_t expert_scratch_bytes(size_t hidden, size_t ffn, size_t n_tokens, size_t k,
                              size_t n_experts) {
  return experts::CudaExpertWorker::scratch_bytes(hidden, ffn, n_tokens, k, n_experts);
}

Result<GpuExperts> create_expert_worker(const model::ModelSpec& spec,
                                        const model::ModelWeights& weights,
                                        const experts::ExpertMap& map,
                                        const ExpertWorkerOptions& options) {
  experts::CudaExpertWorker::Options o;
  o.device = options.device;
  o.worker = options.worker;
  o.reserve_tokens = options.reserve_tokens;
  o.k = options.k;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<experts::CudaExpertWorker> worker,
                          experts::CudaExpertWorker::create(spec, weights, map, o));
  GpuExperts out;
  out.weight_bytes = worker->weight_bytes();
  out.device_bytes = worker->device_bytes();
  out.n_experts = worker->n_experts_held();
  out.worker = std::move(worker);
  return out;
}

Result<GpuDense> create_dense_executor(const model::ModelSpec& spec,
                                       const model::ModelWeights& weights, runtime::KvPool& pool,
                                       const DenseOptions& options) {
  runtime::CudaDenseOptions o;
  o.device = options.device;
  o.max_batch_tokens = options.max_batch_tokens;
  o.window_rings = options.window_rings;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<runtime::CudaDenseExecutor> executor,
                          runtime::CudaDenseExecutor::create(spec, weights, pool, o));
  GpuDense out;
  out.bytes = executor->info().bytes;
  out.executor = std::move(executor);
  return out;
}

}  // namespace tandem::gpu
