// MoeLayerTimings: per-MoE-layer counts and times of each expert worker's share, for profiling.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tandem::experts {

// What one MoE layer did over the MoeLayer::run calls recorded since the last clear().
// pairs[w] / seconds[w]: token-expert pairs given to worker w and the wall time of its run()
// (measured on the thread that ran it; 0 when it had no pairs). joined_seconds: wall time from
// handing out the shares to the moment all of them had finished (the overlapped region; grouping
// and the final weighted sum are outside it).
struct MoeLayerStats {
  uint64_t calls = 0;
  uint64_t tokens = 0;
  std::vector<uint64_t> pairs;  // per worker
  std::vector<double> seconds;  // per worker
  double joined_seconds = 0.0;
};

// A sink a MoeLayer writes into when one is set (MoeLayer::set_timings). A plain value: the
// owner (e.g. `tandem bench --profile`) creates it, and reads or clears it only between forward
// passes, on the forward pass's thread. layers is indexed by model layer (dense layers keep
// calls == 0) and grows on demand.
struct MoeLayerTimings {
  std::vector<MoeLayerStats> layers;

  void clear() { layers.clear(); }
  // The entry of `layer`, created (with n_workers-sized per-worker vectors) when missing.
  MoeLayerStats& at(size_t layer, size_t n_workers);
};

// (a + b - joined) / min(a, b): 1 when the shorter share was hidden entirely behind the longer
// one, 0 when they ran one after the other. 0 when either share took no time.
double overlap_fraction(double a_seconds, double b_seconds, double joined_seconds);

// A text table, one row per MoE layer with calls > 0 and a total row, with the columns
//   layer  tokens  <name0> pairs  <name1> pairs  <name0> ms  <name1> ms  joined ms  overlap
// for workers 0 and 1 (a third or later worker is not shown). Overlap is overlap_fraction of the
// two shares' times, "-" when one of them is 0 (nothing to overlap).
std::string format_moe_timings(const MoeLayerTimings& timings, const std::string& name0,
                               const std::string& name1);

}  // namespace tandem::experts
