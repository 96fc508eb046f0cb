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

Result<DeviceMemory> device_memory(int device) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess && err != cudaErrorNoDevice) {
    cudaGetLastError();
    return unavailable_error(std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(err));
  }
  if (err == cudaErrorNoDevice) cudaGetLastError();
  if (device < 0 || device >= count) {
    return invalid_argument_error("CUDA device " + std::to_string(device) + " does not exist (" +
                                  std::to_string(count) + " visible)");
  }
  err = cudaSetDevice(device);
  DeviceMemory memory;
  if (err == cudaSuccess) err = cudaMemGetInfo(&memory.free_bytes, &memory.total_bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return unavailable_error("cudaMemGetInfo on device " + std::to_string(device) +
                             " failed: " + cudaGetErrorString(err));
  }
  return memory;
}

}  // namespace tandem::kernels::cuda
