// GPU memory plan: what the GPU must hold for a placement (experts, dense weights, KV cache,
// scratch), checked against what the device offers before anything is allocated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/placement/expert_table.h"
#include "engine/placement/planner.h"

namespace tandem::placement {

// Device bytes by kind. Every field is what the owning component allocates (the CUDA expert
// worker: experts + expert_scratch; the CUDA dense executor: dense + kv + dense_scratch); zero
// for a part that stays on the CPU.
struct GpuMemoryDemand {
  uint64_t experts = 0;         // weights of the placed GPU experts
  uint64_t n_experts = 0;       // how many (layer, expert) pairs those are
  uint64_t expert_scratch = 0;  // the expert worker's activations/outputs at max_batch_tokens
  uint64_t dense = 0;           // dense weights (attention, norms, routers, shared experts, head)
  uint64_t kv = 0;              // the KV pool (when attention runs on the GPU)
  uint64_t dense_scratch = 0;   // the dense executor's activations at max_batch_tokens

  // Saturating sum of every field but n_experts.
  uint64_t total() const;
  // total() without the expert weights: what the GPU holds whatever the expert count.
  uint64_t fixed() const;
};

// Device bytes of the GPU experts of `map` (the placement's GPU set), from the checkpoint's sizes
// (ExpertSizes::device_bytes; sizes must have map's shape; a (layer, expert) outside it counts 0).
uint64_t gpu_expert_bytes(const DeviceMap& map, const ExpertSizes& sizes);

// How many of the placed GPU experts fit in `room` bytes, taking them smallest first: with
// equal expert sizes (one weight type, the usual case) exactly floor(room / size); with mixed
// sizes an upper bound on any subset's count.
uint64_t experts_that_fit(const DeviceMap& map, const ExpertSizes& sizes, uint64_t room);

// The device the demand is checked against.
struct GpuOffer {
  std::string device;       // "device 0 (NVIDIA H200)", for messages
  uint64_t free_bytes = 0;  // free device memory reported at start
  uint64_t budget = 0;      // placement.gpu_memory_budget; 0 = no cap beyond free memory
  uint64_t headroom = 0;    // kept free (CUDA context growth, allocator rounding)

  // min(free - headroom, budget when set), saturating at 0.
  uint64_t usable() const;
};

// The usual headroom: 2% of the free memory, at least 256 MiB.
uint64_t default_gpu_headroom(uint64_t free_bytes);

// OK when demand.total() <= offer.usable(). Otherwise RESOURCE_EXHAUSTED with one message that
// names every part of the demand, the device and what it offers, and how many GPU experts would
// fit (experts_that_fit in usable - fixed), telling the operator which key to change
// (placement.num_gpu_experts / gpu_memory_budget, runtime.kv_cache_bytes, runtime.dense_device).
// Pure; any thread.
Status check_gpu_memory(const GpuMemoryDemand& demand, const GpuOffer& offer, const DeviceMap& map,
                        const ExpertSizes& sizes);

// "experts 1.2 GiB (96), expert scratch 40.0 MiB, dense 300.0 MiB, KV 1.0 GiB, dense scratch
// 12.0 MiB = 2.5 GiB" (parts that are zero are left out), for the startup log and the banner.
std::string format_gpu_demand(const GpuMemoryDemand& demand);

}  // namespace tandem::placement
