// Device helpers shared by the CUDA matmul kernels: in-kernel dequantization of weight rows of
// every type of kCudaWeightTypes (cuda_weight_types.h) to float (load8) and the 64 x 32
// shared-memory weight tile load.
//
// Contract: a weight matrix is rows of row_bytes = tensor_type_bytes(type, k) bytes (the layout of
// kernels::WeightMatrix). For a block type, k is a multiple of its block (32 or 256; the launchers
// check it); for F32/F16/BF16 any k > 0 works and columns >= k read as zero. The matrix start must
// be aligned to the type's CudaWeightType::alignment (matmul_enqueue checks it; the expert FFN's
// callers must give it). Q4_0, Q4_1, Q5_0, Q5_1, MXFP4, the K-quants and F8_E4M3_B128 are read
// byte by byte (their rows start at multiples of 18, 20, 22, 24, 17, 144, 176, 210 or 132 bytes).
//
// Every conversion gives exactly the float of kernels::dequantize() (kernels/cpu): the same float
// operations in the same order, written as __fmul_rn / __fsub_rn so that nvcc's default FMA
// contraction cannot fuse them. Denormals are kept (the build does not pass -ftz / fast math).
// Header-only (templates and inline device functions); include from .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_weight_types.h"
#include "kernels/tensor_type.h"

namespace tandem::kernels::cuda::weight_load {

// The weight tile of load_weight_tile: kTileN rows x kTileK columns, filled by kTileThreads
// threads with 8 elements each.
constexpr int kTileN = 64;
constexpr int kTileK = 32;
constexpr int kTileThreads = 256;
static_assert(kTileN * kTileK == kTileThreads * 8, "eight weight elements per thread");

// load8's groups of 8 (c0 % 8 == 0) never straddle a block, and with k a whole number of blocks a
// group is all inside the row or all past it.
constexpr bool blocks_hold_whole_groups_of_8() {
  for (const CudaWeightType& t : kCudaWeightTypes) {
    if (t.block_elements != 1 && t.block_elements % 8 != 0) return false;
  }
  return true;
}
static_assert(blocks_hold_whole_groups_of_8(), "every block holds whole groups of 8");

// Whether T is one element per "block" (F32, F16, BF16): any k, element loads.
template <TensorType T>
inline constexpr bool kIsFloatType = kCudaWeightTypeOf<T>.block_elements == 1;

namespace detail {

// Little-endian 16 bits from two bytes (no alignment needed).
__device__ __forceinline__ unsigned short le16(const uint8_t* p) {
  return static_cast<unsigned short>(p[0] | (p[1] << 8));
}

// The IEEE half at p (any alignment), exactly as a float.
__device__ __forceinline__ float half_at(const uint8_t* p) {
  return __half2float(__ushort_as_half(le16(p)));
}

// Q8_0 (34 B: fp16 d at 2-byte alignment, int8 qs[32]): elements j0 .. j0 + 7 = qs[j] * d.
__device__ __forceinline__ void q8_0(const uint8_t* block, int j0, float* dst) {
  const float d = __half2float(*reinterpret_cast<const __half*>(block));
  const int8_t* qs = reinterpret_cast<const int8_t*>(block + 2) + j0;
#pragma unroll
  for (int j = 0; j < 8; ++j) dst[j] = __fmul_rn(static_cast<float>(qs[j]), d);
}

// Q4_0 (18 B: fp16 d, qs[16]): element j < 16 is the low nibble of qs[j], j >= 16 the high nibble
// of qs[j - 16]; value (q - 8) * d. j0 in {0, 8, 16, 24}.
__device__ __forceinline__ void q4_0(const uint8_t* block, int j0, float* dst) {
  const float d = half_at(block);
  const uint8_t* qs = block + 2 + j0 % 16;
  const int shift = j0 < 16 ? 0 : 4;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    dst[j] = __fmul_rn(static_cast<float>(((qs[j] >> shift) & 0x0f) - 8), d);
  }
}

// Little-endian 32 bits from four bytes (no alignment needed).
__device__ __forceinline__ unsigned le32(const uint8_t* p) {
  return static_cast<unsigned>(p[0]) | (static_cast<unsigned>(p[1]) << 8) |
         (static_cast<unsigned>(p[2]) << 16) | (static_cast<unsigned>(p[3]) << 24);
}

// Q4_1 (20 B: fp16 d, fp16 m, qs[16]), Q5_0 (22 B: fp16 d, uint32 qh, qs[16]) and Q5_1 (24 B: fp16
// d, fp16 m, uint32 qh, qs[16]): the Q4_0 nibble order, bit j of qh the fifth bit of element j;
// values Q4_1 q * d + m, Q5_0 (q - 16) * d, Q5_1 q * d + m (kernels::dequantize_q4_1 / q5_0 /
// q5_1). j0 in {0, 8, 16, 24}.
template <bool kFifthBit, bool kMin>
__device__ __forceinline__ void legacy_q45(const uint8_t* block, int j0, float* dst) {
  const float d = half_at(block);
  const float m = kMin ? half_at(block + 2) : 0.0f;
  const uint8_t* after_scales = block + (kMin ? 4 : 2);
  const unsigned qh = kFifthBit ? le32(after_scales) : 0u;
  const uint8_t* qs = after_scales + (kFifthBit ? 4 : 0) + j0 % 16;
  const int shift = j0 < 16 ? 0 : 4;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    int q = (qs[j] >> shift) & 0x0f;
    if constexpr (kFifthBit) q |= static_cast<int>(((qh >> (j0 + j)) & 1u) << 4);
    if constexpr (kMin) {
      dst[j] = __fadd_rn(__fmul_rn(static_cast<float>(q), d), m);
    } else {
      dst[j] = __fmul_rn(static_cast<float>(q - 16), d);
    }
  }
}

// 2^(e - 128) exactly (ggml's E8M0 half scale): a normal float for e >= 2, the subnormals 2^-127
// and 2^-128 as bit patterns for e = 1 and 0; e = 255 is 2^127 (no NaN code).
__device__ __forceinline__ float e8m0_half(unsigned e) {
  return __uint_as_float(e < 2 ? 0x00200000u << e : (e - 1) << 23);
}

// MXFP4 (17 B: uint8 e, qs[16] in the Q4_0 nibble order): value kvalues[q] * 2^(e - 128) with
// kvalues = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, ..., -12} (the E2M1 values doubled): bit 3 of q is
// the sign, the magnitudes are the nibbles of 0xC8643210. j0 in {0, 8, 16, 24}.
__device__ __forceinline__ void mxfp4(const uint8_t* block, int j0, float* dst) {
  const float d = e8m0_half(block[0]);
  const uint8_t* qs = block + 1 + j0 % 16;
  const int shift = j0 < 16 ? 0 : 4;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const unsigned q = (qs[j] >> shift) & 0x0fu;
    const int magnitude = static_cast<int>((0xC8643210u >> (4 * (q & 7u))) & 0x0fu);
    dst[j] = __fmul_rn(static_cast<float>((q & 8u) != 0 ? -magnitude : magnitude), d);
  }
}

// The 6-bit scale and min of sub-block j (0..7) of Q4_K/Q5_K's 12 packed bytes s (as
// unpack_scale_min of kernels/cpu/dequantize_kquants.cpp).
__device__ __forceinline__ void scale_min_k(const uint8_t* s, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q4_K (144 B: fp16 d, fp16 dmin, scales[12], qs[128]) and Q5_K (176 B: the same with qh[32]
// before qs[128]): element e = 64 c + 32 s + l is nibble s of qs[32 c + l] (plus, for Q5_K, bit
// e / 32 of qh[l] as the fifth bit); value (d * scale) * q - (dmin * min) of sub-block e / 32.
// e0 % 8 == 0, so the 8 elements share one sub-block.
template <bool kFifthBit>
__device__ __forceinline__ void q45_k(const uint8_t* block, int e0, float* dst) {
  const float d = half_at(block);
  const float dmin = half_at(block + 2);
  const int j = e0 / 32;
  const int l0 = e0 % 32;
  int scale = 0;
  int min = 0;
  scale_min_k(block + 4, j, &scale, &min);
  const float d1 = __fmul_rn(d, static_cast<float>(scale));
  const float m1 = __fmul_rn(dmin, static_cast<float>(min));
  const uint8_t* qs = block + (kFifthBit ? 48 : 16) + 32 * (j / 2) + l0;
  const int shift = 4 * (j % 2);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    int q = (qs[i] >> shift) & 0x0f;
    if constexpr (kFifthBit) q |= ((block[16 + l0 + i] >> j) & 1) << 4;  // qh[l0 + i]
    dst[i] = __fsub_rn(__fmul_rn(d1, static_cast<float>(q)), m1);
  }
}

// Q6_K (210 B: ql[128], qh[64], int8 scales[16], fp16 d): element e = 128 h + 32 s + l has low
// nibble s / 2 of ql[64 h + 32 (s % 2) + l] and high bits (qh[32 h + l] >> 2 s) & 3; value
// (d * scales[e / 16]) * (q - 32). e0 % 8 == 0, so the 8 elements share one scale.
__device__ __forceinline__ void q6_k(const uint8_t* block, int e0, float* dst) {
  const int h = e0 / 128;
  const int s = (e0 / 32) % 4;
  const int l0 = e0 % 32;
  const uint8_t* ql = block + 64 * h + 32 * (s % 2) + l0;
  const uint8_t* qh = block + 128 + 32 * h + l0;
  const float d = half_at(block + 208);
  const float dl = __fmul_rn(d, static_cast<float>(static_cast<int8_t>(block[192 + e0 / 16])));
  const int low_shift = 4 * (s / 2);
  const int high_shift = 2 * s;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int low = (ql[i] >> low_shift) & 0x0f;
    const int high = (qh[i] >> high_shift) & 3;
    dst[i] = __fmul_rn(dl, static_cast<float>((low | (high << 4)) - 32));
  }
}

// The value of FP8 E4M3 code b (as kernels::fp8_e4m3_to_fp32; kF8_E4M3_B128 holds no NaN code).
__device__ __forceinline__ float fp8_e4m3(unsigned b) {
  const unsigned sign = (b & 0x80u) << 24;
  const unsigned exponent = (b >> 3) & 0x0fu;
  const unsigned mantissa = b & 0x07u;
  if (exponent != 0) return __uint_as_float(sign | ((exponent + 120u) << 23) | (mantissa << 20));
  const float magnitude = __fmul_rn(static_cast<float>(mantissa), 0x1p-9f);  // exact
  return sign != 0 ? -magnitude : magnitude;
}

// kF8_E4M3_B128 (132 B: little-endian float32 scale, then 128 codes; read byte by byte): element
// e = fp8_e4m3(code e) * scale. e0 % 8 == 0.
__device__ __forceinline__ void f8_e4m3_b128(const uint8_t* block, int e0, float* dst) {
  const float scale = __uint_as_float(static_cast<unsigned>(block[0]) | (block[1] << 8) |
                                      (block[2] << 16) | (static_cast<unsigned>(block[3]) << 24));
#pragma unroll
  for (int j = 0; j < 8; ++j) dst[j] = __fmul_rn(fp8_e4m3(block[4 + e0 + j]), scale);
}

}  // namespace detail

// Converts the 8 weights [c0, c0 + 8) of one row to float; columns >= k are zero. c0 % 8 == 0.
template <TensorType T>
__device__ __forceinline__ void load8(const uint8_t* row, int c0, int k, float* dst) {
  if constexpr (kIsFloatType<T>) {
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
  } else {
    if (c0 >= k) {  // k is whole blocks, so a group of 8 is all in or all out
#pragma unroll
      for (int j = 0; j < 8; ++j) dst[j] = 0.0f;
      return;
    }
    constexpr int kElems = static_cast<int>(kCudaWeightTypeOf<T>.block_elements);
    constexpr size_t kBytes = kCudaWeightTypeOf<T>.block_bytes;
    const uint8_t* block = row + static_cast<size_t>(c0 / kElems) * kBytes;
    const int e0 = c0 % kElems;
    if constexpr (T == TensorType::kQ8_0) {
      detail::q8_0(block, e0, dst);
    } else if constexpr (T == TensorType::kQ4_0) {
      detail::q4_0(block, e0, dst);
    } else if constexpr (T == TensorType::kQ4_1) {
      detail::legacy_q45<false, true>(block, e0, dst);
    } else if constexpr (T == TensorType::kQ5_0) {
      detail::legacy_q45<true, false>(block, e0, dst);
    } else if constexpr (T == TensorType::kQ5_1) {
      detail::legacy_q45<true, true>(block, e0, dst);
    } else if constexpr (T == TensorType::kMXFP4) {
      detail::mxfp4(block, e0, dst);
    } else if constexpr (T == TensorType::kQ4_K) {
      detail::q45_k<false>(block, e0, dst);
    } else if constexpr (T == TensorType::kQ5_K) {
      detail::q45_k<true>(block, e0, dst);
    } else if constexpr (T == TensorType::kF8_E4M3_B128) {
      detail::f8_e4m3_b128(block, e0, dst);
    } else {
      static_assert(T == TensorType::kQ6_K, "a listed block type without a conversion");
      detail::q6_k(block, e0, dst);
    }
  }
}

// load8 for F32/F16/BF16 with wide loads: the 8 weights [c0, c0 + 8) must all be in the row
// (c0 + 8 <= k) and their first byte 16-byte aligned (true for every c0 % 8 == 0 when the row
// start is 16-byte aligned, since 8 elements are 16 or 32 bytes). One 16-byte load for F16/BF16,
// two for F32. Element 2i of a 32-bit word is its low half (little-endian, as the row bytes).
template <TensorType T>
__device__ __forceinline__ void load8_vec(const uint8_t* row, int c0, float* dst) {
  static_assert(kIsFloatType<T>, "wide loads for F32/F16/BF16 only");
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
