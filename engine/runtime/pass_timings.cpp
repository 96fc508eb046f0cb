// PassTimings: the part names, the pass clock and the text report.
#include "engine/runtime/pass_timings.h"

#include <cstdio>
#include <numeric>

namespace tandem::runtime {

std::string_view pass_part_name(PassPart part) {
  switch (part) {
    case PassPart::kSetup:
      return "setup";
    case PassPart::kAttention:
      return "attention";
    case PassPart::kDenseFfn:
      return "dense ffn";
    case PassPart::kMoeInput:
      return "moe input";
    case PassPart::kRouting:
      return "routing";
    case PassPart::kExperts:
      return "experts";
    case PassPart::kMoeOutput:
      return "moe output";
    case PassPart::kHead:
      return "head";
  }
  return "?";
}

double PassTimings::total_seconds() const {
  return std::accumulate(seconds.begin(), seconds.end(), 0.0);
}

PassClock::PassClock(PassTimings* sink) : sink_(sink) {
  if (sink_ != nullptr) last_ = std::chrono::steady_clock::now();
}

void PassClock::mark(PassPart part) {
  if (sink_ == nullptr) return;
  const auto now = std::chrono::steady_clock::now();
  sink_->seconds[static_cast<size_t>(part)] += std::chrono::duration<double>(now - last_).count();
  last_ = now;
}

void PassClock::finish(size_t tokens) {
  if (sink_ == nullptr) return;
  ++sink_->passes;
  sink_->tokens += tokens;
}

std::string format_pass_timings(const PassTimings& timings) {
  if (timings.passes == 0) return "no pass recorded\n";
  const double total = timings.total_seconds();
  const double per_pass = 1e3 / static_cast<double>(timings.passes);
  std::string out;
  char line[128];
  std::snprintf(line, sizeof line, "%-12s %10s %7s\n", "part", "ms/pass", "share");
  out += line;
  for (size_t i = 0; i < kPassParts; ++i) {
    const double s = timings.seconds[i];
    if (!(s > 0.0)) continue;
    const std::string name(pass_part_name(static_cast<PassPart>(i)));
    std::snprintf(line, sizeof line, "%-12s %10.3f %6.1f%%\n", name.c_str(), s * per_pass,
                  total > 0.0 ? 100.0 * s / total : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-12s %10.3f %6.1f%%  (passes: %llu, tokens a pass: %.1f)\n",
                "all", total * per_pass, 100.0, static_cast<unsigned long long>(timings.passes),
                static_cast<double>(timings.tokens) / static_cast<double>(timings.passes));
  out += line;
  return out;
}

}  // namespace tandem::runtime
