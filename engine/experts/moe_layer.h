// MoeLayer: runs one layer's routed experts, splitting token-expert pairs across workers by an
// ExpertMap, and combines the expert outputs with the routing weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/base/status.h"
#include "engine/experts/expert_worker.h"
#include "engine/experts/routing.h"

namespace tandem::experts {

// Which worker (an index into MoeLayer's worker list) computes each (layer, expert). A plain
// value; default-constructed or `uniform` maps send everything to worker 0.
class ExpertMap {
 public:
  ExpertMap() = default;
  static ExpertMap uniform(size_t n_layers, size_t n_experts, uint8_t worker = 0);

  size_t n_layers() const { return n_layers_; }
  size_t n_experts() const { return n_experts_; }
  uint8_t worker(size_t layer, size_t expert) const;
  void set(size_t layer, size_t expert, uint8_t worker);
  // Owner of every expert of `layer` (n_experts entries); empty when the map is empty.
  std::span<const uint8_t> layer(size_t layer) const;

 private:
  size_t n_layers_ = 0;
  size_t n_experts_ = 0;
  std::vector<uint8_t> owner_;  // [n_layers x n_experts]
};

// The executor. Holds non-owning pointers to its workers, which must outlive it. Not
// thread-safe: one forward pass (one thread) uses it at a time.
//
// run(): groups the pairs of `routing` per worker by the map, gives each worker its share
// (workers run one after the other for now; a CUDA worker will overlap with the CPU share), then
// for every token t, in slot order: out_t = sum_slot weight * expert_out(pair). Because each
// pair's expert output is computed the same way whichever worker owns it and the sum is always
// taken in slot order, any split of the experts gives bit-identical results.
class MoeLayer {
 public:
  explicit MoeLayer(std::vector<ExpertWorker*> workers);

  size_t n_workers() const { return workers_.size(); }

  // input: [n_tokens x hidden]; out: [n_tokens x hidden] (overwritten). An empty map means
  // "all on worker 0"; otherwise it must cover `layer` and n_experts, and name existing workers
  // (INVALID_ARGUMENT otherwise). Worker errors are returned as they are.
  Status run(size_t layer, size_t n_experts, std::span<const float> input, size_t n_tokens,
             size_t hidden, const Routing& routing, const ExpertMap& map, std::span<float> out);

 private:
  std::vector<ExpertWorker*> workers_;
  std::vector<ExpertGroups> groups_;  // per worker, reused
  std::vector<float> pair_out_;
};

}  // namespace tandem::experts
