// The GPU backend of this build behind one interface. CMake compiles gpu_backend_cuda.cpp when
// CUDA is enabled and gpu_backend_none.cpp otherwise, so no code above it tests TANDEM_WITH_CUDA:
// a CPU-only build compiles every line of the server and the CLI, and a GPU demand there is a
// clear error instead of a missing symbol.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "engine/experts/expert_worker.h"
#include "engine/experts/moe_layer.h"
#include "engine/model/model.h"
#include "engine/runtime/dense_device_plan.h"
#include "engine/runtime/dense_executor.h"
#include "engine/runtime/paged_kv_cache.h"
#include "kernels/cuda/device_info.h"

namespace tandem::gpu {

// The device facts are the CUDA layer's plain structs (kernels/cuda/device_info.h holds no CUDA
// types, so every build may include it).
using DeviceInfo = kernels::cuda::DeviceInfo;
using DeviceMemory = kernels::cuda::DeviceMemory;

// "CUDA", or "" in a build without a GPU backend.
std::string_view backend_name();
inline bool backend_built() {
  return !backend_name().empty();
}

// The visible devices: an empty list without a backend, a driver or a device; UNAVAILABLE
// naming the runtime's error when the driver fails. Any thread.
Result<std::vector<DeviceInfo>> list_devices();

// Free and total memory of `device` now (creates its context on the calling thread).
// INVALID_ARGUMENT for an ordinal that does not exist; UNIMPLEMENTED without a backend.
Result<DeviceMemory> device_memory(int device);

// Device bytes of an expert worker's per-call scratch for n_tokens tokens whose n_tokens * k
// pairs all go to it, over at most n_experts experts of one layer. 0 without a backend. Pure.
uint64_t expert_scratch_bytes(size_t hidden, size_t ffn, size_t n_tokens, size_t k,
                              size_t n_experts);

struct ExpertWorkerOptions {
  int device = 0;      // device ordinal
  uint8_t worker = 1;  // the ExpertMap worker index whose experts the worker holds
  // Scratch for passes of up to reserve_tokens tokens with top-k routing is allocated at once
  // (0 = grown on demand).
  size_t reserve_tokens = 0;
  size_t k = 0;
};

// A device expert worker and what it holds. Owned by the caller; it must outlive every
// MoeLayer that uses it.
struct GpuExperts {
  std::unique_ptr<experts::ExpertWorker> worker;
  uint64_t weight_bytes = 0;  // the experts' copies
  uint64_t device_bytes = 0;  // weights and scratch
  size_t n_experts = 0;       // (layer, expert) pairs held
};

// Copies to the device every routed expert that `map` gives to options.worker and returns the
// worker that runs them (experts::ExpertWorker; results match the CPU worker to float rounding).
// Errors, all before anything is kept: the backend's (no device, an ordinal that does not exist,
// a weight type its kernels do not take, memory), UNIMPLEMENTED without a backend.
Result<GpuExperts> create_expert_worker(const model::ModelSpec& spec,
                                        const model::ModelWeights& weights,
                                        const experts::ExpertMap& map,
                                        const ExpertWorkerOptions& options);

struct DenseOptions {
  int device = 0;
  size_t max_batch_tokens = 0;                   // the most tokens of one forward pass; positive
  runtime::DeviceWindowRings window_rings = {};  // runtime::CudaDenseOptions::window_rings
};

// A device dense executor (attention, norms, routers, shared experts, dense FFNs, head) over a
// device mirror of `pool`, and the device bytes it allocated.
struct GpuDense {
  std::unique_ptr<runtime::DenseExecutor> executor;
  runtime::CudaDenseBytes bytes;
};

// Errors, all before anything is kept: the backend's (no device, a model or weight type its
// code does not run — runtime::dense_executor_unsupported names the model limits — memory),
// UNIMPLEMENTED without a backend. `pool` must outlive every call of the executor.
Result<GpuDense> create_dense_executor(const model::ModelSpec& spec,
                                       const model::ModelWeights& weights, runtime::KvPool& pool,
                                       const DenseOptions& options);

}  // namespace tandem::gpu
