// Enumerates CUDA devices through the runtime API.
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/device_info.h"

namespace tandem::kernels::cuda {

Result<std::vector<DeviceInfo>> list_devices() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorNoDevice) return std::vector<DeviceInfo>{};
  if (err != cudaSuccess) {
    return unavailable_error(std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(err));
  }
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    err = cudaGetDeviceProperties(&prop, i);
    if (err != cudaSuccess) {
      return unavailable_error("cudaGetDeviceProperties(" + std::to_string(i) +
                               ") failed: " + cudaGetErrorString(err));
    }
    devices.push_back(DeviceInfo{i, prop.name, prop.totalGlobalMem, prop.major, prop.minor});
  }
  return devices;
}

}  // namespace tandem::kernels::cuda
