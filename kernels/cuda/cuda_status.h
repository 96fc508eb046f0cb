// CUDA runtime errors as tandem::Status, for host code that calls the CUDA runtime API.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "base/status.h"

namespace tandem::kernels::cuda {

// INTERNAL "CUDA <what> failed: <CUDA's error string>". Also takes the error out of the runtime's
// per-thread last error, where it would stay (until a sticky error, the context is still usable)
// and be reported again by the next kernel launch's check.
inline Status cuda_error(cudaError_t err, const std::string& what) {
  cudaGetLastError();
  return internal_error("CUDA " + what + " failed: " + cudaGetErrorString(err));
}

// "1048576 bytes (1 MiB)", for out-of-memory messages that must name exact byte counts.
inline std::string bytes_and_mib(uint64_t bytes) {
  return std::to_string(bytes) + " bytes (" + std::to_string(bytes / (1024 * 1024)) + " MiB)";
}

}  // namespace tandem::kernels::cuda

// Returns cuda_error(err, what) from the enclosing function when `call` does not succeed.
#define TANDEM_CUDA_RETURN_IF_ERROR(call, what)                           \
  do {                                                                    \
    const cudaError_t tandem_cuda_err_ = (call);                          \
    if (tandem_cuda_err_ != cudaSuccess) {                                \
      return ::tandem::kernels::cuda::cuda_error(tandem_cuda_err_, what); \
    }                                                                     \
  } while (0)
