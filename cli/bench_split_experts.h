// `tandem bench --split-cpu-experts K`: K experts of the benchmarked model on a second CPU expert
// worker with its own pool, standing in for a GPU worker (the overlap path without a GPU).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/result.h"
#include "base/thread_pool.h"
#include "cli/model_session.h"
#include "engine/experts/expert_worker.h"

namespace tandem::cli {

// `--split-cpu-experts K`: a second CpuExpertWorker with its own ThreadPool of `threads` threads
// holding K experts (the uniform placement of `--gpu-experts K`), so that the MoE layer runs
// the two CPU shares concurrently (the overlap path without a GPU). `worker` views the session's
// weights and uses `pool`; both must outlive every forward pass of the session's runner. K == 0:
// nothing attached. Errors: the CPU worker's and the planner's. Call from the thread that runs
// the session's forward passes, before the first one.
struct SplitCpuExperts {
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<experts::ExpertWorker> worker;  // declared after pool: destroyed first
  uint64_t n_experts = 0;
};
Result<SplitCpuExperts> attach_split_cpu_experts(ModelSession& session, int64_t k, int threads);

}  // namespace tandem::cli
