// `tandem bench --gpu-experts K` / `--split-cpu-experts K`: K experts of the benchmarked model on a
// second expert worker (CUDA, or a CPU worker with its own pool standing in for it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cli/model_session.h"
#include "engine/base/result.h"
#include "engine/base/thread_pool.h"
#include "engine/experts/expert_worker.h"

namespace tandem::cli {

// The worker a bench run attached to its runner, and what it holds. Owned by the bench run; it
// must outlive every forward pass of the session's runner.
struct GpuExperts {
  std::unique_ptr<experts::ExpertWorker> worker;  // null when K == 0
  uint64_t n_experts = 0;                         // experts on the device
  uint64_t device_bytes = 0;                      // device memory the worker holds
};

// K == 0: nothing (the runner keeps its CPU worker alone). K > 0: plans K experts with the
// `uniform` placement policy (K / layers per MoE layer by expert index, as `tandem plan
// --policy uniform` without statistics; clamped to the model's experts), copies them to CUDA
// device 0 in a CudaExpertWorker and gives the runner the CPU worker plus that worker. Errors: the
// CUDA worker's (no device, out of memory, weight type), UNIMPLEMENTED in a build without CUDA.
// Call from the thread that runs the session's forward passes, before the first one.
Result<GpuExperts> attach_gpu_experts(ModelSession& session, int64_t k);

// `--split-cpu-experts K`: a second CpuExpertWorker with its own ThreadPool of `threads` threads
// holding K experts (same uniform placement as attach_gpu_experts), so that the MoE layer runs
// the two CPU shares concurrently (the overlap path without a GPU). `worker` views the session's
// weights and uses `pool`; both must outlive every forward pass of the session's runner. K == 0:
// nothing attached. Errors: the CPU worker's and the planner's. Same thread as
// attach_gpu_experts.
struct SplitCpuExperts {
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<experts::ExpertWorker> worker;  // declared after pool: destroyed first
  uint64_t n_experts = 0;
};
Result<SplitCpuExperts> attach_split_cpu_experts(ModelSession& session, int64_t k, int threads);

}  // namespace tandem::cli
