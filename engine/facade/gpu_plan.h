// The engine's GPU side at start: which device, what the GPU holds (the placement's experts; the
// dense parts and the KV cache per EngineOptions::dense_device), whether that fits, and the
// objects that run there, attached to the runner before the scheduler starts. Every call goes
// through the build's GPU backend (engine/gpu/gpu_backend.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/result.h"
#include "engine/experts/expert_worker.h"
#include "engine/facade/engine_options.h"
#include "engine/model/checkpoint.h"
#include "engine/placement/gpu_memory_plan.h"
#include "engine/placement/placement_startup.h"
#include "engine/runtime/scheduler.h"

namespace tandem::engine {

// The devices as seen once at start, before the placement is planned. A plain value.
struct GpuProbe {
  bool backend_built = false;  // this build has a GPU backend
  int n_devices = 0;           // visible devices (0 without a backend, driver or device)
  int device = 0;              // EngineOptions::gpu_device
  std::string label;           // "device 0 (NVIDIA H200)"; "" when none is used
  uint64_t free_bytes = 0;     // free memory of `device` at the probe
  bool dense_on_gpu = false;

  bool has_device() const { return device < n_devices; }
};

// Lists the devices and decides where the dense parts run (EngineOptions::dense_device):
//  auto: on the GPU when the build has a backend and gpu_device exists, else on the CPU;
//  gpu:  FAILED_PRECONDITION naming the reason when there is no such device;
//  cpu:  on the CPU.
// A gpu_device beyond the visible devices is INVALID_ARGUMENT when devices exist (a typo should
// not silently run everything on the CPU). Logs what it found. Main thread.
Result<GpuProbe> probe_gpu(const EngineOptions& options);

// The probe as the checkpoint can use it: dense_on_gpu cleared, with a log line, when the model's
// dense parts cannot run on the GPU (runtime::dense_executor_unsupported, or a dense matrix of a
// type the CUDA kernels do not take: runtime::cuda_dense_unsupported_tensor) and dense_device is
// auto; FAILED_PRECONDITION naming what is missing when it is gpu. Errors of the dense plan.
Result<GpuProbe> fit_probe_to_model(const EngineOptions& options,
                                    const model::Checkpoint& checkpoint, GpuProbe probe);

// What the device offers the engine: probe.free_bytes less default headroom, capped by
// EngineOptions::gpu_memory_budget.
placement::GpuOffer gpu_offer(const EngineOptions& options, const GpuProbe& probe);

// Device bytes besides expert weights for this model and these options: the dense executor's
// weights, KV pool and scratch when probe.dense_on_gpu, and the expert worker's scratch at
// limits.max_batch_tokens when with_experts. Pure apart from reading sizes of the checkpoint.
Result<placement::GpuMemoryDemand> gpu_fixed_demand(const EngineOptions& options,
                                                    const model::Checkpoint& checkpoint,
                                                    const GpuProbe& probe, bool with_experts);

// What runs on the GPU while serving. Owned by the Engine, destroyed after the scheduler (the
// runner keeps raw pointers to the worker).
struct GpuServing {
  std::unique_ptr<experts::ExpertWorker> experts;  // the GPU expert worker; null without experts
  placement::GpuMemoryDemand planned;              // what the memory plan counted, by kind
  placement::GpuMemoryDemand allocated;            // what was allocated, by kind
  std::string device_label;
  bool dense_on_gpu = false;
};

// Checks the memory plan (RESOURCE_EXHAUSTED naming how many GPU experts would fit, before any
// allocation), then creates the GPU expert worker for the placement's GPU experts (worker 1 of
// the runner's expert map, scratch reserved for limits.max_batch_tokens) and, when
// probe.dense_on_gpu, the GPU dense executor over the scheduler's KV pool. Nothing to do (an
// empty GpuServing) without GPU experts and with dense parts on the CPU. Then the self-check
// (gpu_self_check.h): the probe's logits with the GPU attached must match the CPU's
// (FAILED_PRECONDITION naming the error otherwise). Call after the scheduler is created and
// before it starts. FAILED_PRECONDITION for a GPU demand without a device.
Result<GpuServing> attach_gpu(const EngineOptions& options, const model::Checkpoint& checkpoint,
                              const placement::StartupPlacement& planned, const GpuProbe& probe,
                              runtime::Scheduler& scheduler);

}  // namespace tandem::engine
