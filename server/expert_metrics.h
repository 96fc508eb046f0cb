// ExpertMetricsExport: copies MoeActivity's per-device expert work into ServerMetrics.
#pragma once

#include <cstdint>

#include "server/metrics.h"
#include "server/moe_activity.h"

namespace tandem::server {

// Remembers what was exported, so that each update() adds only what is new. A plain value; one
// thread at a time (tandemd's gauge loop in daemon_run.cpp).
class ExpertMetricsExport {
 public:
  // Adds to tandem_expert_tokens_total{device} and tandem_expert_seconds_total{device} ("cpu",
  // "gpu") what `activity` counted since the previous call (everything on the first call): its
  // expert_pairs and expert_nanoseconds. Sets tandem_gpu_expert_hit_ratio to gpu / (gpu + cpu)
  // pairs once any pair was counted.
  void update(const MoeActivity& activity, ServerMetrics& metrics);

 private:
  uint64_t gpu_pairs_ = 0;
  uint64_t cpu_pairs_ = 0;
  uint64_t gpu_nanoseconds_ = 0;
  uint64_t cpu_nanoseconds_ = 0;
};

}  // namespace tandem::server
