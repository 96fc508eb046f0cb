// MoeActivity: tandemd's live record of expert routing — activation counts and per-request MoE
// counters (GPU versus CPU work), fed by the scheduler as a RoutingObserver.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/result.h"
#include "engine/placement/activation_stats.h"
#include "engine/placement/model_identity.h"
#include "engine/placement/planner.h"
#include "engine/runtime/routing_observer.h"

namespace tandem::server {

// Expert work of one phase (prefill or decode) of one request, summed over all MoE layers; the
// fields mean what tandem.v1.MoeCounters says.
struct MoeCounters {
  uint64_t token_layers_gpu_only = 0;  // (token, layer) steps whose experts all ran on the GPU
  uint64_t token_layers_cpu_only = 0;  // ... all on the CPU
  uint64_t token_layers_split = 0;     // ... partly on each
  uint64_t expert_pairs_gpu = 0;       // token-expert pairs computed on the GPU
  uint64_t expert_pairs_cpu = 0;       // ... on the CPU

  MoeCounters& operator+=(const MoeCounters& o);
  friend bool operator==(const MoeCounters&, const MoeCounters&) = default;
};

// Where a known request stands. There is no "queued": see MoeActivity.
enum class RequestActivityState { kRunning, kFinished };

// One request's counters at the moment of the snapshot. A plain value.
struct RequestMoeSnapshot {
  RequestActivityState state = RequestActivityState::kRunning;
  // Rows of prefill work run through the model: the prompt tokens, plus any recomputed after a
  // preemption (those count again).
  uint64_t prompt_tokens = 0;
  // Rows of decode work run through the model: each is a generated token fed back in. A request
  // that sampled G tokens shows G - 1 once it finished (the first token is sampled from the
  // prefill, the last is never fed back), so decode counters and this count always agree
  // (token-layer steps = generated_tokens x MoE layers).
  uint64_t generated_tokens = 0;
  MoeCounters prefill;
  MoeCounters decode;
};

// The routing observer of tandemd. Owned by tandemd's main; must outlive the scheduler that calls
// it and the services that read it.
//
// Threads: on_forward / on_started / on_finished are called by the scheduler thread only (the
// RoutingObserver contract). Every const member may be called from any thread at any time.
// Costs per on_forward call: plain per-token counting into a recorder private to the scheduler
// thread, then one fold into the shared table (one lock) and one lock of the per-request map.
//
// Request lifetime: a request becomes known at on_started (the scheduler admitted it for the
// first time); before that — queued, or never admitted — request() has nothing for it, so the
// tandem.v1 service answers NOT_FOUND, never REQUEST_STATE_QUEUED. on_finished marks a known
// request finished (unknown ids are ignored: a request aborted while queued stays unknown). At
// most `max_finished` finished requests are kept; the oldest finished one is forgotten first.
// A request id reused after its earlier request finished starts over from zero counters.
class MoeActivity final : public runtime::RoutingObserver {
 public:
  static constexpr size_t kDefaultMaxFinished = 1024;

  // `model`: the served model's identity (placement::model_identity(checkpoint), or the loaded
  // statistics' model()); the live counts start at zero for it.
  // `loaded`: the statistics loaded at startup (StartupPlacement::stats), if any; merged() adds
  // them to the live counts.
  // `map`: the placement; experts it does not list (e.g. an empty map: no GPU) count as CPU.
  // INVALID_ARGUMENT when `model` is inconsistent (ActivationStats::create) or `map` lists a
  // layer that is not a MoE layer of `model` or has another expert count; FAILED_PRECONDITION
  // when `loaded` belongs to another model. max_finished 0 keeps no finished request.
  static Result<std::unique_ptr<MoeActivity>> create(
      const placement::ModelIdentity& model, std::optional<placement::ActivationStats> loaded,
      const placement::DeviceMap& map, size_t max_finished = kDefaultMaxFinished);

  MoeActivity(const MoeActivity&) = delete;
  MoeActivity& operator=(const MoeActivity&) = delete;

  // runtime::RoutingObserver; scheduler thread only.
  void on_forward(std::span<const experts::Routing> routing,
                  std::span<const runtime::RoutedToken> tokens) override;
  // Worker 0 (always the CPU expert worker) counts as CPU time; every other worker as GPU time
  // (in tandemd, worker 1 is the CUDA expert worker, present only when the placement has GPU
  // experts). Negative, NaN, infinite or absurd (>= 1e9 s) entries are ignored.
  void on_expert_seconds(std::span<const double> seconds_per_worker) override;
  void on_started(const std::string& request_id) override;
  void on_finished(const std::string& request_id) override;

  // What this process recorded since it started (tokens: rows run through the model).
  placement::ActivationStats live() const;
  // The loaded statistics plus live(); just live() when none were loaded. OUT_OF_RANGE when a
  // sum would pass 2^64 - 1.
  Result<placement::ActivationStats> merged() const;
  bool has_loaded() const { return loaded_.has_value(); }
  const placement::ModelIdentity& model() const { return model_; }

  // The counters of a known request (running, or among the kept finished ones); nullopt for an
  // unknown or forgotten id.
  std::optional<RequestMoeSnapshot> request(const std::string& request_id) const;
  // Requests currently held (running + kept finished).
  size_t tracked_requests() const;

  // Token-expert pairs computed on the GPU (gpu = true) or the CPU since the start, all requests
  // (for the metrics). Relaxed atomics: monotonic, not synchronized with live().
  uint64_t expert_pairs(bool gpu) const;
  // Wall time the GPU (gpu = true) or the CPU expert workers spent on their shares since the
  // start, in nanoseconds (on_expert_seconds, rounded per pass). Relaxed atomics, monotonic.
  uint64_t expert_nanoseconds(bool gpu) const;

 private:
  struct Entry {
    RequestMoeSnapshot counters;
    uint64_t generation = 0;  // tells a reused id's entries apart in finished_order_
  };
  // Consecutive rows of one forward pass that belong to one request phase.
  struct Segment {
    const std::string* request_id = nullptr;
    bool prefill = false;
    size_t begin = 0;
    size_t end = 0;
    MoeCounters counters;
  };

  MoeActivity(placement::ActivationStats empty, std::optional<placement::ActivationStats> loaded,
              std::vector<int32_t> map_row_of_layer, std::vector<uint8_t> on_gpu,
              uint64_t n_experts, size_t max_finished);

  bool expert_on_gpu(int32_t map_row, int32_t expert) const;
  void evict_finished_locked();

  placement::ModelIdentity model_;
  std::optional<placement::ActivationStats> loaded_;  // immutable after create
  placement::SharedActivationStats live_;

  // The placement as a flat lookup: map_row_of_layer_[layer] (-1: not in the map), then
  // on_gpu_[row * n_experts_ + expert].
  std::vector<int32_t> map_row_of_layer_;
  std::vector<uint8_t> on_gpu_;
  uint64_t n_experts_ = 0;

  // Scheduler thread only.
  placement::ActivationRecorder recorder_;
  std::vector<Segment> segments_;  // scratch, reused across calls

  std::atomic<uint64_t> pairs_gpu_{0};
  std::atomic<uint64_t> pairs_cpu_{0};
  std::atomic<uint64_t> nanoseconds_gpu_{0};
  std::atomic<uint64_t> nanoseconds_cpu_{0};

  const size_t max_finished_;
  mutable std::mutex mu_;  // guards everything below
  std::unordered_map<std::string, Entry> requests_;
  std::deque<std::pair<std::string, uint64_t>> finished_order_;  // (id, generation), oldest first
  size_t finished_count_ = 0;  // entries in requests_ whose state is kFinished
  uint64_t next_generation_ = 0;
};

}  // namespace tandem::server
