// MoeLayerTimings: growing the per-layer table, the overlap figure and the text report.
#include "engine/experts/moe_layer_timings.h"

#include <algorithm>
#include <cstdio>

namespace tandem::experts {

MoeLayerStats& MoeLayerTimings::at(size_t layer, size_t n_workers) {
  if (layers.size() <= layer) layers.resize(layer + 1);
  MoeLayerStats& s = layers[layer];
  if (s.pairs.size() < n_workers) {
    s.pairs.resize(n_workers, 0);
    s.seconds.resize(n_workers, 0.0);
  }
  return s;
}

double overlap_fraction(double a_seconds, double b_seconds, double joined_seconds) {
  const double shorter = std::min(a_seconds, b_seconds);
  if (!(shorter > 0.0)) return 0.0;
  return (a_seconds + b_seconds - joined_seconds) / shorter;
}

namespace {

void append_row(std::string& out, const char* label, uint64_t tokens, uint64_t p0, uint64_t p1,
                double s0, double s1, double joined) {
  char overlap[32];
  if (s0 > 0.0 && s1 > 0.0) {
    std::snprintf(overlap, sizeof(overlap), "%.2f", overlap_fraction(s0, s1, joined));
  } else {
    std::snprintf(overlap, sizeof(overlap), "-");
  }
  char line[256];
  std::snprintf(line, sizeof(line), "%6s %8llu %10llu %10llu %10.3f %10.3f %10.3f %8s\n", label,
                static_cast<unsigned long long>(tokens), static_cast<unsigned long long>(p0),
                static_cast<unsigned long long>(p1), s0 * 1e3, s1 * 1e3, joined * 1e3, overlap);
  out += line;
}

}  // namespace

std::string format_moe_timings(const MoeLayerTimings& timings, const std::string& name0,
                               const std::string& name1) {
  std::string out;
  char header[256];
  const std::string p0 = name0 + " pairs";
  const std::string p1 = name1 + " pairs";
  const std::string m0 = name0 + " ms";
  const std::string m1 = name1 + " ms";
  std::snprintf(header, sizeof(header), "%6s %8s %10s %10s %10s %10s %10s %8s\n", "layer", "tokens",
                p0.c_str(), p1.c_str(), m0.c_str(), m1.c_str(), "joined ms", "overlap");
  out += header;
  uint64_t tokens = 0;
  uint64_t pairs[2] = {0, 0};
  double seconds[2] = {0.0, 0.0};
  double joined = 0.0;
  for (size_t l = 0; l < timings.layers.size(); ++l) {
    const MoeLayerStats& s = timings.layers[l];
    if (s.calls == 0) continue;
    const auto pair_of = [&](size_t w) { return w < s.pairs.size() ? s.pairs[w] : 0; };
    const auto sec_of = [&](size_t w) { return w < s.seconds.size() ? s.seconds[w] : 0.0; };
    append_row(out, std::to_string(l).c_str(), s.tokens, pair_of(0), pair_of(1), sec_of(0),
               sec_of(1), s.joined_seconds);
    tokens += s.tokens;
    for (size_t w = 0; w < 2; ++w) {
      pairs[w] += pair_of(w);
      seconds[w] += sec_of(w);
    }
    joined += s.joined_seconds;
  }
  append_row(out, "all", tokens, pairs[0], pairs[1], seconds[0], seconds[1], joined);
  return out;
}

}  // namespace tandem::experts
