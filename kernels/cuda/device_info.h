// The CUDA devices visible to this process (name, memory, compute capability).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/result.h"

namespace tandem::kernels::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  size_t total_memory_bytes = 0;
  int compute_major = 0;
  int compute_minor = 0;
};

struct DeviceMemory {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};

// Free and total memory of device `device` now (cudaMemGetInfo; makes the device current on the
// calling thread and creates its context). INVALID_ARGUMENT for an ordinal that does not exist,
// UNAVAILABLE naming the CUDA error otherwise.
Result<DeviceMemory> device_memory(int device);

// The visible devices; an empty list when the driver reports none. A driver or runtime failure
// (no driver installed, version mismatch) is an UNAVAILABLE error naming the CUDA error.
Result<std::vector<DeviceInfo>> list_devices();

}  // namespace tandem::kernels::cuda
