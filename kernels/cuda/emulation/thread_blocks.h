// The CUDA emulation's thread blocks: every CUDA thread of a block runs as a fiber on the host
// thread that launched the grid, switched only where the kernel waits for others (__syncthreads,
// warp shuffles); blocks run one after another, the threads of alternate blocks started in
// opposite orders so that a missing barrier shows as a wrong result. Threads that have returned
// count as arrived at a __syncthreads, as on the hardware. A shuffle whose mask names a lane that
// has returned, waits at __syncthreads or does not exist (undefined on the hardware) fails the
// launch with a message instead of passing.
// What it cannot show: races between blocks, memory ordering, timing, nvcc's code generation.
// Any host thread may launch; each has its own fibers. Not for use outside kernels/cuda/emulation.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cuda/emulation/vector_types.h"

namespace tandem::cuda_emulation {

inline constexpr unsigned kWarpSize = 32;
inline constexpr unsigned kMaxBlockThreads = 1024;

// The coordinates of the running CUDA thread (threadIdx, blockIdx, blockDim, gridDim).
struct ThreadCoords {
  uint3 thread_idx{0, 0, 0};
  uint3 block_idx{0, 0, 0};
  dim3 block_dim;
  dim3 grid_dim;
};

// The running CUDA thread's coordinates; only inside a kernel run by run_grid.
const ThreadCoords& current_thread();

// Runs body(context) once for every thread of every block of the grid, on this host thread.
// Returns an empty string, or what the kernel did wrong (the remaining threads are abandoned).
std::string run_grid(const dim3& grid, const dim3& block, void (*body)(void*), void* context);

// __syncthreads: waits until every thread of the block that has not returned arrives.
void sync_threads();

// The warp exchange of the __shfl_*_sync intrinsics: this lane offers `bits` and receives the
// bits offered by lane `src_lane` of its warp, once every lane named in `mask` has arrived.
uint64_t warp_exchange(unsigned mask, uint64_t bits, unsigned src_lane);

// This thread's lane within its warp (threads are numbered x fastest, then y, then z).
unsigned lane_id();

}  // namespace tandem::cuda_emulation
