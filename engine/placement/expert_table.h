// ExpertTable and ExpertSizes: per (MoE layer, expert) activation weights and byte sizes.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace tandem::placement {

// A MoE-layers x experts table of non-negative finite weights (activation counts or frequencies):
// the planner's input. Row r is model layer layers[r]. A plain value; any thread.
struct ExpertTable {
  std::vector<uint32_t> layers;  // model layer index of each row, strictly ascending
  uint64_t n_experts = 0;
  std::vector<double> values;  // layers.size() x n_experts, row-major

  size_t n_rows() const { return layers.size(); }
  double at(size_t row, uint64_t expert) const { return values[row * n_experts + expert]; }
};

// OK, or INVALID_ARGUMENT naming the first problem: no rows, no experts, layers not strictly
// ascending, values.size() != rows x experts, a negative or non-finite value (with its position).
Status validate_table(const ExpertTable& table);

// The bytes one expert occupies, per (MoE layer, expert), row-major like ExpertTable: `bytes` as
// stored in the checkpoint (gate + up + down, and any expert biases), `device_bytes` on a GPU
// expert worker (each of those parts rounded up to its alignment; what the GPU plans count).
// Per-layer (and even per-expert) sizes may differ when tensor types differ.
struct ExpertSizes {
  std::vector<uint32_t> layers;
  uint64_t n_experts = 0;
  std::vector<uint64_t> bytes;
  std::vector<uint64_t> device_bytes;  // the same shape as bytes

  uint64_t at(size_t row, uint64_t expert) const { return bytes[row * n_experts + expert]; }
  uint64_t device_at(size_t row, uint64_t expert) const {
    return device_bytes[row * n_experts + expert];
  }
};

}  // namespace tandem::placement
