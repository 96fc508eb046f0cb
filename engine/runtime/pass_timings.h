// PassTimings: where a forward pass's time goes, part by part, for profiling (`tandem bench
// --profile`, also with --concurrency).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::runtime {

// The parts of ModelRunner's layer loop, in the order a pass meets them:
//   kSetup      the dense executor's begin (positions, block tables, the pass's buffers);
//   kAttention  each layer's attention half (norm, projections, rotary embedding, cache write,
//               attention, output projection and residual);
//   kDenseFfn   the FFN of the dense layers (leading dense layers of DeepSeek or GLM);
//   kMoeInput   the MoE layers' FFN norm and router matmul;
//   kRouting    top-k selection and the routing weights;
//   kExperts    the routed experts (MoeLayer::run: every expert worker, joined);
//   kMoeOutput  the shared expert and the residual;
//   kHead       the final norm and the LM head of the rows that want logits.
// The token embedding before the loop and the sampling after it are not counted.
// With the dense parts on a GPU (runtime.dense_device) the dense executor's calls return once
// their work is queued, so their times are the host's, and the wait lands on the next part that
// synchronizes (the MoE input, which copies the router logits back).
enum class PassPart {
  kSetup,
  kAttention,
  kDenseFfn,
  kMoeInput,
  kRouting,
  kExperts,
  kMoeOutput,
  kHead
};
inline constexpr size_t kPassParts = static_cast<size_t>(PassPart::kHead) + 1;

// "setup", "attention", "dense ffn", "moe input", "routing", "experts", "moe output", "head".
std::string_view pass_part_name(PassPart part);

// Sums over the passes recorded since construction or clear(). A plain value: its owner reads it
// only while no forward pass that writes it runs.
struct PassTimings {
  uint64_t passes = 0;
  uint64_t tokens = 0;  // the passes' batch tokens, summed
  std::array<double, kPassParts> seconds{};

  void clear() { *this = PassTimings(); }
  double total_seconds() const;
  double at(PassPart part) const { return seconds[static_cast<size_t>(part)]; }
};

// Measures one pass into a sink: mark(part) adds the time since the previous mark (or since
// construction) to `part`; finish(tokens) counts the pass. Every call does nothing without a sink
// (null), so a pass that is not profiled reads no clock.
class PassClock {
 public:
  explicit PassClock(PassTimings* sink);
  void mark(PassPart part);
  void finish(size_t tokens);

 private:
  PassTimings* sink_;
  std::chrono::steady_clock::time_point last_;
};

// A text table, one row per part that took time, then the total:
//   part  ms/pass  share
// ms/pass is the part's seconds over the recorded passes; share its fraction of the total.
// "no pass recorded" when passes is 0.
std::string format_pass_timings(const PassTimings& timings);

}  // namespace tandem::runtime
