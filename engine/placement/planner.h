// The placement planner: which experts live on the GPU, by policy (frequency, uniform, budget).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "engine/placement/expert_table.h"
#include "engine/placement/placement_policy.h"

namespace tandem::placement {

enum class Device : uint8_t { kCpu, kGpu };

// Per (MoE layer, expert): where the expert runs. Every expert also stays in CPU memory; kGpu
// means the GPU holds a copy and runs it. Immutable after planning; any thread may read it.
class DeviceMap {
 public:
  DeviceMap() = default;
  DeviceMap(std::vector<uint32_t> layers, uint64_t n_experts);

  const std::vector<uint32_t>& layers() const { return layers_; }
  uint64_t n_experts() const { return n_experts_; }
  Device at_row(size_t row, uint64_t expert) const { return map_[row * n_experts_ + expert]; }
  void set_row(size_t row, uint64_t expert, Device d) { map_[row * n_experts_ + expert] = d; }
  // By model layer index; kCpu for dense or unknown layers and experts out of range.
  Device at(uint64_t layer, uint64_t expert) const;
  uint64_t n_gpu() const;
  // (model layer, expert) of every GPU expert, ascending.
  std::vector<std::pair<uint32_t, uint32_t>> gpu_experts() const;

 private:
  std::vector<uint32_t> layers_;
  uint64_t n_experts_ = 0;
  std::vector<Device> map_;
};

struct PlanRequest {
  PlacementPolicy policy = PlacementPolicy::kFrequency;
  // frequency / uniform: experts on the GPU over all MoE layers, clamped to [0, layers x experts].
  int64_t num_gpu_experts = 0;
  // budget: GPU bytes in all, and what the GPU must hold anyway (dense weights, embeddings, KV
  // cache, scratch); experts get budget - reserved (0 when reserved exceeds the budget).
  uint64_t gpu_memory_budget = 0;
  uint64_t gpu_reserved_bytes = 0;
};

struct Placement {
  DeviceMap map;
  PlacementPolicy requested = PlacementPolicy::kFrequency;
  // What decided the order: `frequency` without statistics becomes `uniform`; `budget` without
  // statistics fills layers evenly by expert index.
  PlacementPolicy used = PlacementPolicy::kFrequency;
  bool fell_back_to_uniform = false;  // no statistics where the policy wanted them
  uint64_t k = 0;                     // the clamped count (frequency / uniform)
  uint64_t expert_budget_bytes = 0;   // budget: bytes left for experts after the reservation
  std::vector<std::string> warnings;  // also logged with spdlog::warn
};

// Plans a placement for the MoE layers `layers` (model indices, strictly ascending) with
// `n_experts` experts each.
// - frequency: the k largest entries of `stats` over all layers; ties: count descending, then
//   layer ascending, then expert ascending. Without stats: uniform, with a warning.
// - uniform: k / layers per layer, the first k % layers layers one more; inside a layer by
//   stats (same tie order) when given, else by expert index.
// - budget: in frequency order (or, without stats, expert index then layer: an even fill), each
//   expert whose size still fits the remaining budget is taken (first fit; a too-large expert is
//   skipped and smaller later ones may still fit). Needs `sizes`.
// `stats` and `sizes`, when given, must have this shape. INVALID_ARGUMENT for a bad shape, bad
// values (validate_table) or budget without sizes. Deterministic: same inputs, same map, on
// every machine. Pure apart from logging; any thread.
Result<Placement> plan_placement(const PlanRequest& request, const std::vector<uint32_t>& layers,
                                 uint64_t n_experts, const ExpertTable* stats,
                                 const ExpertSizes* sizes);

}  // namespace tandem::placement
