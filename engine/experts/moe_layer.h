// MoeLayer: runs one layer's routed experts, splitting token-expert pairs across workers by an
// ExpertMap, and combines the expert outputs with the routing weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "engine/experts/expert_worker.h"
#include "engine/experts/moe_layer_timings.h"
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
// thread-safe: one forward pass (one thread, "the caller") uses it at a time.
//
// run(): groups the pairs of `routing` per worker by the map, then runs the shares at the same
// time: every worker except the first runs on a persistent helper thread of its own (created
// once in the constructor, woken per call, joined in the destructor), while worker 0 (the CPU
// worker) runs on the calling thread; run() joins them all, then for every token t, in slot
// order: out_t = sum_slot weight * expert_out(pair). Because each pair's expert output is
// computed the same way whichever worker owns it and the sum is always taken in slot order after
// the join, any split of the experts, concurrent or not, gives bit-identical results.
//
// Pool rule: ThreadPool::parallel_for takes one caller at a time, so two workers that report
// the same ExpertWorker::thread_pool() (e.g. a second CpuExpertWorker on the runner's pool), or
// one worker listed twice, must not run together. Such a worker (index > 0) gets no helper
// thread: it runs on the calling thread after worker 0, one after the other. To overlap two CPU
// workers, give each its own ThreadPool.
//
// Worker seconds: every call reads steady_clock around each share that runs (two readings on
// the thread that runs it, whether the share succeeds or not) and adds the wall time to that
// worker's running total (worker_seconds()); concurrent shares each count fully, so the totals
// can add up to more than the call's wall time. Measuring never changes a result.
//
// Timings: with a sink set (set_timings), each call also adds to the sink's entry for its layer
// (the same share times, a reading around the joined region, calls, tokens and pairs); with
// none, only the worker seconds are kept.
class MoeLayer {
 public:
  explicit MoeLayer(std::vector<ExpertWorker*> workers);
  ~MoeLayer();
  MoeLayer(const MoeLayer&) = delete;
  MoeLayer& operator=(const MoeLayer&) = delete;

  size_t n_workers() const { return workers_.size(); }
  // Workers that run on a helper thread (concurrently with worker 0).
  size_t n_concurrent_workers() const { return helpers_.size(); }

  // input: [n_tokens x hidden]; out: [n_tokens x hidden] (overwritten). An empty map means
  // "all on worker 0"; otherwise it must cover `layer` and n_experts, and name existing workers
  // (INVALID_ARGUMENT otherwise). Worker errors are returned as they are (the first in worker
  // order when several fail), always after every share has finished.
  Status run(size_t layer, size_t n_experts, std::span<const float> input, size_t n_tokens,
             size_t hidden, const Routing& routing, const ExpertMap& map, std::span<float> out);

  // Non-owning; null (the default) turns measuring off. The sink must outlive its use; read it
  // between run() calls, from the caller's thread.
  void set_timings(MoeLayerTimings* timings) { timings_ = timings; }

  // Per worker (n_workers() entries): seconds its shares took, summed over the run() calls since
  // construction or the last reset_worker_seconds(). Caller's thread, between run() calls.
  std::span<const double> worker_seconds() const { return worker_seconds_; }
  void reset_worker_seconds();

 private:
  struct Helper;
  static void helper_loop(Helper* helper);

  std::vector<ExpertWorker*> workers_;
  std::vector<ExpertGroups> groups_;  // per worker, reused
  std::vector<ExpertJob> jobs_;       // per worker, reused
  std::vector<Status> statuses_;      // per worker, of the current call
  std::vector<float> pair_out_;
  std::vector<std::unique_ptr<Helper>> helpers_;  // one per concurrent worker
  std::vector<Helper*> helper_of_;                // per worker; null: runs on the caller
  MoeLayerTimings* timings_ = nullptr;
  std::vector<double> worker_seconds_;  // per worker, see worker_seconds()
};

}  // namespace tandem::experts
