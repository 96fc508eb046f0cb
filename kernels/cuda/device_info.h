// The CUDA devices visible to this process (name, memory, compute capability).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "engine/base/result.h"

namespace tandem::kernels::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  size_t total_memory_bytes = 0;
  int compute_major = 0;
  int compute_minor = 0;
};

// The visible devices; an empty list when the driver reports none. A driver or runtime failure
// (no driver installed, version mismatch) is an UNAVAILABLE error naming the CUDA error.
Result<std::vector<DeviceInfo>> list_devices();

}  // namespace tandem::kernels::cuda
