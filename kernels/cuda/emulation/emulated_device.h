// The CUDA emulation's device side: the qualifiers, built-in variables and intrinsics the kernels
// of kernels/cuda use, for g++ (thread_blocks.h runs them). __shared__ variables are per host
// thread statics: the threads of a block share them and blocks run one after another, so they
// keep the last block's values where the hardware leaves them undefined. Float intrinsics with a
// rounding suffix are the plain operations (the emulation compiles with -ffp-contract=off).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/emulation/emulated_half.h"
#include "kernels/cuda/emulation/thread_blocks.h"
#include "kernels/cuda/emulation/vector_types.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local

#define threadIdx (::tandem::cuda_emulation::current_thread().thread_idx)
#define blockIdx (::tandem::cuda_emulation::current_thread().block_idx)
#define blockDim (::tandem::cuda_emulation::current_thread().block_dim)
#define gridDim (::tandem::cuda_emulation::current_thread().grid_dim)

inline constexpr int warpSize = 32;

inline void __syncthreads() {
  ::tandem::cuda_emulation::sync_threads();
}

// Lane ^ lane_mask's value of v, within segments of `width` lanes (a power of two <= 32).
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize) {
  static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable_v<T>);
  const unsigned lane = ::tandem::cuda_emulation::lane_id();
  unsigned src = lane ^ static_cast<unsigned>(lane_mask);
  if (src / static_cast<unsigned>(width) != lane / static_cast<unsigned>(width)) src = lane;
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = ::tandem::cuda_emulation::warp_exchange(mask, bits, src);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

inline float __fmul_rn(float a, float b) {
  return a * b;
}
inline float __fadd_rn(float a, float b) {
  return a + b;
}
inline float __fsub_rn(float a, float b) {
  return a - b;
}
inline float __fdiv_rn(float a, float b) {
  return a / b;
}
inline float __uint_as_float(unsigned u) {
  return std::bit_cast<float>(u);
}
inline unsigned __float_as_uint(float f) {
  return std::bit_cast<unsigned>(f);
}
