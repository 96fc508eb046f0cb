// ActivationStats: how often the router chose each expert; per-thread recorders fold into it.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "base/result.h"
#include "engine/placement/expert_table.h"
#include "engine/placement/model_identity.h"

namespace tandem::placement {

// A MoE-layers x experts table of selection counts plus the number of tokens they cover, for one
// model. Row r is the r-th MoE layer (model layer moe_layer_ids()[r]). A plain value, not
// synchronized: one thread writes, or use SharedActivationStats.
class ActivationStats {
 public:
  // Zero counts for `model`. INVALID_ARGUMENT when the identity is inconsistent: moe_layers size
  // != n_layers, no MoE layer, n_experts 0 or above model::kMaxExperts, n_layers above
  // model::kMaxLayers, n_experts_used > n_experts.
  static Result<ActivationStats> create(ModelIdentity model);

  const ModelIdentity& model() const { return model_; }
  const std::vector<uint32_t>& moe_layer_ids() const { return layer_ids_; }
  size_t n_rows() const { return layer_ids_.size(); }
  uint64_t n_experts() const { return model_.n_experts; }
  // The row of model layer `layer`, or -1 when it is dense or out of range.
  int64_t row_of(uint64_t layer) const;

  uint64_t count(size_t row, uint64_t expert) const { return counts_[row * n_experts() + expert]; }
  std::span<const uint64_t> counts() const { return counts_; }  // row-major
  uint64_t tokens() const { return tokens_; }
  uint64_t total() const;  // sum of all counts (saturating)

  // Adds n (saturating at 2^64-1). row < n_rows() and expert < n_experts() (a bug otherwise).
  void add(size_t row, uint64_t expert, uint64_t n);
  void add_tokens(uint64_t n);
  // Adds `other`'s counts and tokens. FAILED_PRECONDITION (check_same_model's message) when it
  // is for another model; OUT_OF_RANGE when a sum would pass 2^64-1 (nothing is changed then).
  Status merge(const ActivationStats& other);

  // The counts as planner input (rows labelled with the model layer indices).
  ExpertTable table() const;

 private:
  ModelIdentity model_;
  std::vector<uint32_t> layer_ids_;
  std::vector<int32_t> row_of_layer_;  // n_layers entries, -1 for dense layers
  std::vector<uint64_t> counts_;
  uint64_t tokens_ = 0;
};

// One worker thread's private counters: plain increments, no atomics, no lock. Fold them into
// the shared table from time to time (e.g. once per forward step). Owned and used by one thread.
class ActivationRecorder {
 public:
  // Counters shaped like `stats` (all zero).
  explicit ActivationRecorder(const ActivationStats& stats);

  // Counts one selection of each id in `selected_expert_ids` (any number of tokens' top-k ids,
  // flattened) in model layer `layer`. Ids outside [0, n_experts) (e.g. -1 padding) and layers
  // that are not MoE layers are not counted; ignored() says how many ids were dropped.
  void record(uint64_t layer, std::span<const int32_t> selected_expert_ids);
  void add_tokens(uint64_t n) { tokens_ += n; }
  uint64_t ignored() const { return ignored_; }
  // Adds the counters to `stats` (which must have the shape this recorder was made for; a bug
  // otherwise) and zeroes them.
  void fold_into(ActivationStats& stats);

 private:
  std::vector<int32_t> row_of_layer_;
  uint64_t n_experts_ = 0;
  std::vector<uint64_t> counts_;
  uint64_t tokens_ = 0;
  uint64_t ignored_ = 0;
};

// The live table shared by all worker threads. fold() takes a lock once per fold (never per
// token); snapshot() gives a consistent copy. Every member may be called from any thread.
class SharedActivationStats {
 public:
  explicit SharedActivationStats(ActivationStats initial) : stats_(std::move(initial)) {}
  ActivationRecorder make_recorder() const;
  void fold(ActivationRecorder& recorder);
  ActivationStats snapshot() const;

 private:
  mutable std::mutex mu_;
  ActivationStats stats_;
};

}  // namespace tandem::placement
