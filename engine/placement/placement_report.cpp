// PlacementReport: built from a placement, printed as a table or JSON.
#include "engine/placement/placement_report.h"

#include <cstdio>

namespace tandem::placement {

namespace {

std::string bytes_text(uint64_t b) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  return buf;
}

std::string experts_text(const std::vector<uint32_t>& experts, size_t max_shown) {
  std::string s;
  for (size_t i = 0; i < experts.size() && i < max_shown; ++i) {
    s += (i ? "," : "") + std::to_string(experts[i]);
  }
  if (experts.size() > max_shown) s += ",...";
  return s.empty() ? "-" : s;
}

}  // namespace

PlacementReport make_report(const Placement& p, const ExpertTable* stats,
                            const ExpertSizes* sizes) {
  PlacementReport r;
  r.requested = p.requested;
  r.used = p.used;
  r.fell_back_to_uniform = p.fell_back_to_uniform;
  r.warnings = p.warnings;
  r.n_experts = p.map.n_experts();
  r.n_total_experts = p.map.layers().size() * p.map.n_experts();
  r.has_sizes = sizes != nullptr;
  r.expert_budget_bytes = p.expert_budget_bytes;
  double all = 0;
  double covered = 0;
  for (size_t row = 0; row < p.map.layers().size(); ++row) {
    LayerPlacement l;
    l.layer = p.map.layers()[row];
    for (uint64_t e = 0; e < p.map.n_experts(); ++e) {
      const bool gpu = p.map.at_row(row, e) == Device::kGpu;
      const double v = stats != nullptr ? stats->at(row, e) : 0.0;
      l.activations += v;
      if (gpu) {
        // What the GPU expert worker allocates for it; on the CPU, the bytes as stored.
        const uint64_t bytes = sizes != nullptr ? sizes->device_at(row, e) : 0;
        l.gpu_experts.push_back(static_cast<uint32_t>(e));
        l.gpu_bytes += bytes;
        r.gpu_expert_bytes += bytes;
        l.covered += v;
      } else {
        r.cpu_expert_bytes += sizes != nullptr ? sizes->at(row, e) : 0;
      }
    }
    r.n_gpu_experts += l.gpu_experts.size();
    all += l.activations;
    covered += l.covered;
    r.layers.push_back(std::move(l));
  }
  if (stats != nullptr) r.coverage = all > 0 ? covered / all : 0.0;
  return r;
}

std::string format_report_table(const PlacementReport& r) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof(line), "placement: policy %s%s, %llu of %llu experts on the GPU\n",
                std::string(placement_policy_name(r.requested)).c_str(),
                r.fell_back_to_uniform ? " (no statistics: even fill)" : "",
                static_cast<unsigned long long>(r.n_gpu_experts),
                static_cast<unsigned long long>(r.n_total_experts));
  out += line;
  for (const std::string& w : r.warnings) out += "warning: " + w + "\n";
  std::snprintf(line, sizeof(line), "%6s %8s %12s %9s  %s\n", "layer", "gpu", "gpu bytes",
                "coverage", "gpu experts");
  out += line;
  for (const LayerPlacement& l : r.layers) {
    std::string cov = "-";
    if (r.coverage) {
      char c[32];
      std::snprintf(c, sizeof(c), "%.1f%%",
                    l.activations > 0 ? 100.0 * l.covered / l.activations : 0.0);
      cov = c;
    }
    std::snprintf(line, sizeof(line), "%6u %8zu %12s %9s  %s\n", l.layer, l.gpu_experts.size(),
                  r.has_sizes ? bytes_text(l.gpu_bytes).c_str() : "-", cov.c_str(),
                  experts_text(l.gpu_experts, 16).c_str());
    out += line;
  }
  if (r.has_sizes) {
    out += "expert bytes: GPU " + bytes_text(r.gpu_expert_bytes) + ", CPU " +
           bytes_text(r.cpu_expert_bytes) +
           " (GPU experts stay readable from the checkpoint in CPU memory)\n";
  }
  if (r.coverage) {
    std::snprintf(line, sizeof(line),
                  "coverage: %.2f%% of recorded activations (expected GPU hit rate)\n",
                  100.0 * *r.coverage);
    out += line;
  } else {
    out += "coverage: unknown (no activation statistics)\n";
  }
  return out;
}

nlohmann::json report_json(const PlacementReport& r) {
  using nlohmann::json;
  json pairs = json::array();
  json layers = json::array();
  for (const LayerPlacement& l : r.layers) {
    for (uint32_t e : l.gpu_experts) pairs.push_back({l.layer, e});
    json lj = {{"layer", l.layer},
               {"n_gpu_experts", l.gpu_experts.size()},
               {"gpu_experts", l.gpu_experts},
               {"gpu_bytes", r.has_sizes ? json(l.gpu_bytes) : json(nullptr)},
               {"coverage", r.coverage ? json(l.activations > 0 ? l.covered / l.activations : 0.0)
                                       : json(nullptr)}};
    layers.push_back(std::move(lj));
  }
  return json{{"policy", placement_policy_name(r.requested)},
              {"policy_used", placement_policy_name(r.used)},
              {"fell_back_to_uniform", r.fell_back_to_uniform},
              {"warnings", r.warnings},
              {"n_gpu_experts", r.n_gpu_experts},
              {"n_total_experts", r.n_total_experts},
              {"gpu_experts", std::move(pairs)},
              {"coverage", r.coverage ? json(*r.coverage) : json(nullptr)},
              {"layers", std::move(layers)},
              {"gpu_expert_bytes", r.has_sizes ? json(r.gpu_expert_bytes) : json(nullptr)},
              {"cpu_expert_bytes", r.has_sizes ? json(r.cpu_expert_bytes) : json(nullptr)},
              {"expert_budget_bytes", r.expert_budget_bytes}};
}

}  // namespace tandem::placement
