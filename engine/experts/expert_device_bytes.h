// What one part of a routed expert (a weight matrix as stored, or a bias vector as floats) takes
// on a GPU expert worker: its bytes rounded up to the worker's 256-byte alignment. The one rule
// the worker's allocation (cuda_expert_worker.cpp) and the placement's GPU plan
// (placement::expert_sizes) share, so that the plan counts what the worker allocates.
#pragma once

#include <cstdint>

namespace tandem::experts {

inline constexpr uint64_t kExpertDeviceAlignment = 256;

constexpr uint64_t expert_device_part_bytes(uint64_t bytes) {
  return (bytes + kExpertDeviceAlignment - 1) / kExpertDeviceAlignment * kExpertDeviceAlignment;
}

}  // namespace tandem::experts
