// ExpertMetricsExport: per-device expert pairs and seconds as counter deltas.
#include "server/expert_metrics.h"

namespace tandem::server {

void ExpertMetricsExport::update(const MoeActivity& activity, ServerMetrics& metrics) {
  const uint64_t gpu = activity.expert_pairs(true);
  const uint64_t cpu = activity.expert_pairs(false);
  const uint64_t gpu_ns = activity.expert_nanoseconds(true);
  const uint64_t cpu_ns = activity.expert_nanoseconds(false);
  // The counters are monotonic, so each difference is what was counted since the last call.
  metrics.add_expert_tokens("gpu", static_cast<int64_t>(gpu - gpu_pairs_),
                            static_cast<double>(gpu_ns - gpu_nanoseconds_) * 1e-9);
  metrics.add_expert_tokens("cpu", static_cast<int64_t>(cpu - cpu_pairs_),
                            static_cast<double>(cpu_ns - cpu_nanoseconds_) * 1e-9);
  gpu_pairs_ = gpu;
  cpu_pairs_ = cpu;
  gpu_nanoseconds_ = gpu_ns;
  cpu_nanoseconds_ = cpu_ns;
  if (gpu + cpu > 0) {
    metrics.set_gpu_hit_rate(static_cast<double>(gpu) / static_cast<double>(gpu + cpu));
  }
}

}  // namespace tandem::server
