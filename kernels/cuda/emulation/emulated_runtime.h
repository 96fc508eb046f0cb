// The CUDA emulation's runtime API: the subset of cuda_runtime.h that Tandem calls, on host memory.
// One emulated device (its memory size from TANDEM_CUDA_EMULATION_MIB, default 8192). Device
// allocations are host allocations registered as device memory, so that a copy in the wrong
// direction, a copy past an allocation's end, a free of a pointer that is not one, or a launch on
// a destroyed stream fails as CUDA fails it (with the CUDA error codes), where a plain host
// implementation would pass it. New device memory is filled with 0xff bytes (NaN floats), as a
// kernel reading memory nothing wrote would find garbage, and ends at an inaccessible page, so a
// kernel running past an allocation (by more than its rounding to 256 bytes) faults. Work is
// synchronous: a copy or a kernel has run when the call returns, so the emulation cannot show a
// missing stream synchronisation. A kernel that fails (thread_blocks.h) leaves a sticky error that
// every later call returns, as a faulting kernel does to a CUDA context. Any thread; the last error
// is per thread.
#pragma once

#include <cstddef>

#include "kernels/cuda/emulation/vector_types.h"

enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorLaunchFailure = 719,
};
using cudaError_t = cudaError;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

struct CUstream_st;
using cudaStream_t = CUstream_st*;

inline constexpr unsigned cudaStreamDefault = 0;
inline constexpr unsigned cudaStreamNonBlocking = 1;
inline constexpr unsigned cudaHostAllocDefault = 0;

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int major;
  int minor;
  int multiProcessorCount;
  int warpSize;
  int maxThreadsPerBlock;
};

const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
cudaError_t cudaDeviceSynchronize();
// Frees every device and pinned allocation and every stream, and clears the sticky error (the
// emulation's tests call it after a kernel that was meant to fail).
cudaError_t cudaDeviceReset();

cudaError_t cudaMalloc(void** ptr, size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned flags);
cudaError_t cudaMallocHost(void** ptr, size_t bytes);
cudaError_t cudaFreeHost(void* ptr);

template <typename T>
cudaError_t cudaMalloc(T** ptr, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
template <typename T>
cudaError_t cudaHostAlloc(T** ptr, size_t bytes, unsigned flags) {
  return cudaHostAlloc(reinterpret_cast<void**>(ptr), bytes, flags);
}
template <typename T>
cudaError_t cudaMallocHost(T** ptr, size_t bytes) {
  return cudaMallocHost(reinterpret_cast<void**>(ptr), bytes);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
// height rows of width bytes, dst_pitch and src_pitch bytes apart.
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);

namespace tandem::cuda_emulation {

// Runs a kernel's grid (emulated_launch.h): checks the launch shape and the stream, then runs it;
// a refused launch sets the calling thread's last error, a failing kernel the sticky error.
void launch_grid(const char* kernel, const dim3& grid, const dim3& block, cudaStream_t stream,
                 void (*body)(void*), void* context);

}  // namespace tandem::cuda_emulation
