// Device helpers shared by the CUDA matmul kernels: in-kernel dequantization of weight rows in
// F32, F16, BF16 and Q8_0 to float (load8) and the 64 x 32 shared-memory weight tile load.
//
// Contract: a weight matrix is rows of row_bytes = tensor_type_bytes(type, k) bytes (the layout of
// kernels::WeightMatrix). For Q8_0, k is a multiple of 32 (the launchers check it); for the other
// types any k > 0 works and columns >= k read as zero. Rows must be aligned to their element
// (2 bytes for F16/BF16/Q8_0, 4 for F32), which the row layout gives when the matrix start is.
// Header-only (templates and inline device functions); include from .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/tensor_type.h"

namespace tandem::kernels::cuda::weight_load {

constexpr int kQ8_0BlockBytes = 34;  // fp16 scale + 32 int8
constexpr int kQ8_0BlockElems = 32;

// The weight tile of load_weight_tile: kTileN rows x kTileK columns, filled by kTileThreads
// threads with 8 elements each.
constexpr int kTileN = 64;
constexpr int kTileK = 32;
constexpr int kTileThreads = 256;
static_assert(kTileN * kTileK == kTileThreads * 8, "eight weight elements per thread");
static_assert(kTileK % kQ8_0BlockElems == 0, "a K step covers whole Q8_0 blocks");

// Converts the 8 weights [c0, c0 + 8) of one row to float; columns >= k are zero. c0 % 8 == 0.
template <TensorType T>
__device__ __forceinline__ void load8(const uint8_t* row, int c0, int k, float* dst) {
  if constexpr (T == TensorType::kQ8_0) {
    if (c0 >= k) {  // k is a multiple of 32, so a group of 8 is all in or all out
#pragma unroll
      for (int j = 0; j < 8; ++j) dst[j] = 0.0f;
      return;
    }
    const uint8_t* block = row + static_cast<size_t>(c0 / kQ8_0BlockElems) * kQ8_0BlockBytes;
    const float d = __half2float(*reinterpret_cast<const __half*>(block));
    const int8_t* qs = reinterpret_cast<const int8_t*>(block + 2) + (c0 % kQ8_0BlockElems);
#pragma unroll
    for (int j = 0; j < 8; ++j) dst[j] = d * static_cast<float>(qs[j]);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int c = c0 + j;
      float v = 0.0f;
      if (c < k) {
        if constexpr (T == TensorType::kF32) {
          v = reinterpret_cast<const float*>(row)[c];
        } else if constexpr (T == TensorType::kF16) {
          v = __half2float(reinterpret_cast<const __half*>(row)[c]);
        } else {  // kBF16: the top half of a float32
          v = __uint_as_float(static_cast<unsigned>(reinterpret_cast<const uint16_t*>(row)[c])
                              << 16);
        }
      }
      dst[j] = v;
    }
  }
}

// load8 for F32/F16/BF16 with wide loads: the 8 weights [c0, c0 + 8) must all be in the row
// (c0 + 8 <= k) and their first byte 16-byte aligned (true for every c0 % 8 == 0 when the row
// start is 16-byte aligned, since 8 elements are 16 or 32 bytes). One 16-byte load for F16/BF16,
// two for F32. Element 2i of a 32-bit word is its low half (little-endian, as the row bytes).
template <TensorType T>
__device__ __forceinline__ void load8_vec(const uint8_t* row, int c0, float* dst) {
  static_assert(T == TensorType::kF32 || T == TensorType::kF16 || T == TensorType::kBF16);
  if constexpr (T == TensorType::kF32) {
    const auto* p = reinterpret_cast<const float4*>(row + static_cast<size_t>(c0) * 4);
    const float4 a = p[0];
    const float4 b = p[1];
    dst[0] = a.x;
    dst[1] = a.y;
    dst[2] = a.z;
    dst[3] = a.w;
    dst[4] = b.x;
    dst[5] = b.y;
    dst[6] = b.z;
    dst[7] = b.w;
  } else {
    const uint4 u = *reinterpret_cast<const uint4*>(row + static_cast<size_t>(c0) * 2);
    const unsigned words[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (T == TensorType::kF16) {
        dst[2 * i] =
            __half2float(__ushort_as_half(static_cast<unsigned short>(words[i] & 0xffffu)));
        dst[2 * i + 1] =
            __half2float(__ushort_as_half(static_cast<unsigned short>(words[i] >> 16)));
      } else {  // kBF16
        dst[2 * i] = __uint_as_float(words[i] << 16);
        dst[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
      }
    }
  }
}

// Loads this thread's 8 weights of the kTileN x kTileK weight tile at (n0, k0) into ws: thread i
// of the kTileThreads covers row n0 + i / 4, columns k0 + (i % 4) * 8 .. + 8. Rows >= n_rows and
// columns >= k are zero. blockDim.x must be kTileThreads.
template <TensorType T>
__device__ __forceinline__ void load_weight_tile(const uint8_t* w, size_t row_bytes, int n_rows,
                                                 int k, int n0, int k0, float (*ws)[kTileK + 1]) {
  const int local_n = static_cast<int>(threadIdx.x) / 4;
  const int local_c = (static_cast<int>(threadIdx.x) % 4) * 8;
  const int n = n0 + local_n;
  float tmp[8];
  if (n < n_rows) {
    load8<T>(w + static_cast<size_t>(n) * row_bytes, k0 + local_c, k, tmp);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) tmp[j] = 0.0f;
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) ws[local_n][local_c + j] = tmp[j];
}

}  // namespace tandem::kernels::cuda::weight_load
