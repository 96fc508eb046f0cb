// The paged KV write and causal GQA attention over a paged KV pool of dense_ops.h (see the
// not-yet-optimized list at the top of dense_ops.cu).
//
// Attention layout: one block of kAttnThreads threads per (token, query head), blockIdx.x = token
// * n_heads + head. The query row sits in shared memory; positions first .. token_pos (first = 0,
// or token_pos - window + 1 with a sliding window) are visited in ascending order in chunks of
// kAttnChunk: each warp computes the scaled dot products of some of
// the chunk's positions (lanes split head_dim, then a shuffle reduction), the chunk's exp weights
// are taken against the running maximum (online softmax: running max m, running sum l, and the
// output accumulator rescaled by exp(m_old - m_new)), and thread i accumulates output dims i,
// i + kAttnThreads, ... of the value_dim (MLA: the latent values, the leading floats of each key
// row; values == keys then). out = acc / l. A head's sink logit starts the online softmax as a
// position of weight exp(sink - m) with no value: m = sink, l = 1, acc = 0.
//
// The K/V elements are floats or halves (DeviceKvLayer::type): both kernels are templates over the
// element type, read through to_float (exact for a half) and written through from_float (a half
// rounded to nearest even: __float2half_rn, the bits of F16C's vcvtps2ph and of the host's scalar
// conversion).
//
// Device-side guards: a block id read from a table outside [0, n_blocks) or a negative token
// position makes that (token, head)'s output NaN (never a read outside the pool); a kv_write slot
// outside [0, n_blocks * block_rows) is not written (never a write outside the pool).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cuda/dense_ops.h"
#include "kernels/cuda/dense_ops_internal.h"
#include "kernels/cuda/launch.cuh"

namespace tandem::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kAttnThreads = 128;
constexpr int kAttnWarps = kAttnThreads / kWarp;
constexpr int kAttnChunk = 64;
constexpr int kMaxHeadDim = static_cast<int>(kMaxAttentionKeyDim);
constexpr int kMaxValueDim = static_cast<int>(kMaxAttentionValueDim);
constexpr int kAttnDimsPerThread = kMaxValueDim / kAttnThreads;  // 4
constexpr int kKvWriteThreads = 256;
static_assert(kAttnThreads >= kAttnChunk, "one thread per chunk position computes its weight");
static_assert(kMaxValueDim % kAttnThreads == 0, "whole output dims per thread");

__device__ __forceinline__ float to_float(float x) {
  return x;
}
__device__ __forceinline__ float to_float(__half x) {
  return __half2float(x);
}
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}

template <typename T>
struct AttentionParams {
  const float* q;
  float* out;
  const T* keys;
  const T* values;
  const int32_t* token_seq;
  const int32_t* token_pos;
  const int32_t* table_begin;
  const int32_t* tables;
  int64_t block_rows;
  int64_t n_blocks;
  size_t kv_dim;
  int n_heads;
  int group;  // n_heads / n_kv_heads
  int head_dim;
  int value_dim;
  float scale;
  int64_t window;      // 0: none
  const float* sinks;  // [n_heads] or null
};

template <typename T>
__global__ void __launch_bounds__(kAttnThreads) attention_kernel(AttentionParams<T> p) {
  __shared__ float qs[kMaxHeadDim];
  __shared__ float scores[kAttnChunk];
  __shared__ float weights[kAttnChunk];
  __shared__ size_t row_off[kAttnChunk];  // element offset of the chunk position's K/V head slice
  __shared__ int bad;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % kWarp;
  const int warp = tid / kWarp;
  const size_t t = blockIdx.x / static_cast<unsigned>(p.n_heads);
  const int h = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.n_heads));
  const size_t q_off = (t * static_cast<size_t>(p.n_heads) + static_cast<size_t>(h)) *
                       static_cast<size_t>(p.head_dim);
  const size_t out_off = (t * static_cast<size_t>(p.n_heads) + static_cast<size_t>(h)) *
                         static_cast<size_t>(p.value_dim);
  for (int d = tid; d < p.head_dim; d += kAttnThreads) qs[d] = p.q[q_off + d];
  if (tid == 0) bad = 0;
  const int32_t seq = p.token_seq[t];
  const int32_t pos = p.token_pos[t];  // the same value in every thread: uniform branches below
  if (pos < 0) {
    for (int d = tid; d < p.value_dim; d += kAttnThreads) p.out[out_off + d] = NAN;
    return;
  }
  const int32_t* table = p.tables + p.table_begin[seq];
  const size_t head_off = static_cast<size_t>(h / p.group) * static_cast<size_t>(p.head_dim);
  const size_t block_stride = static_cast<size_t>(p.block_rows) * p.kv_dim;
  const int64_t n_keys = static_cast<int64_t>(pos) + 1;
  // Windowed layers start at the first position of the window; the blocks before it are never
  // read (a host cache may have freed them).
  const int64_t first = p.window > 0 && n_keys > p.window ? n_keys - p.window : 0;
  float m = -INFINITY;
  float l = 0.0f;
  if (p.sinks != nullptr) {
    m = p.sinks[h];
    l = 1.0f;
  }
  float acc[kAttnDimsPerThread];
#pragma unroll
  for (int i = 0; i < kAttnDimsPerThread; ++i) acc[i] = 0.0f;
  __syncthreads();  // qs and bad are set

  for (int64_t p0 = first; p0 < n_keys; p0 += kAttnChunk) {
    const int n = static_cast<int>(n_keys - p0 < kAttnChunk ? n_keys - p0 : kAttnChunk);
    // Scores: warp w takes chunk positions w, w + kAttnWarps, ... (warp-uniform loop and branch,
    // so every lane reaches the full-mask shuffles).
    for (int j = warp; j < n; j += kAttnWarps) {
      const int64_t pj = p0 + j;
      const int32_t block = table[pj / p.block_rows];
      float dot = 0.0f;
      size_t off = 0;
      if (block >= 0 && block < p.n_blocks) {
        off = static_cast<size_t>(block) * block_stride +
              static_cast<size_t>(pj % p.block_rows) * p.kv_dim + head_off;
        const T* k = p.keys + off;
        for (int d = lane; d < p.head_dim; d += kWarp) dot = fmaf(qs[d], to_float(k[d]), dot);
      } else if (lane == 0) {
        bad = 1;
      }
#pragma unroll
      for (int o = kWarp / 2; o > 0; o /= 2) dot += __shfl_xor_sync(kFullMask, dot, o);
      if (lane == 0) {
        scores[j] = p.scale * dot;
        row_off[j] = off;
      }
    }
    __syncthreads();  // scores, row_off and bad of this chunk are complete
    if (bad != 0) {   // uniform: read after the barrier, written only before it
      for (int d = tid; d < p.value_dim; d += kAttnThreads) p.out[out_off + d] = NAN;
      return;
    }
    float chunk_max = -INFINITY;
    for (int j = 0; j < n; ++j) chunk_max = fmaxf(chunk_max, scores[j]);
    const float m_new = fmaxf(m, chunk_max);
    // 0 on the first chunk without a sink (m = -inf); with one, the sink's weight rescaled.
    const float alpha = expf(m - m_new);
    if (tid < n) weights[tid] = expf(scores[tid] - m_new);
    __syncthreads();  // weights are complete
    float chunk_sum = 0.0f;
    for (int j = 0; j < n; ++j) chunk_sum += weights[j];  // same order in every thread
    l = l * alpha + chunk_sum;
#pragma unroll
    for (int i = 0; i < kAttnDimsPerThread; ++i) {
      const int d = tid + i * kAttnThreads;
      if (d < p.value_dim) {
        float a = acc[i] * alpha;
#pragma unroll 4
        for (int j = 0; j < n; ++j) a = fmaf(weights[j], to_float(p.values[row_off[j] + d]), a);
        acc[i] = a;
      }
    }
    m = m_new;
    __syncthreads();  // everyone is done with scores, weights and row_off before the next chunk
  }
  const float inv = 1.0f / l;
#pragma unroll
  for (int i = 0; i < kAttnDimsPerThread; ++i) {
    const int d = tid + i * kAttnThreads;
    if (d < p.value_dim) p.out[out_off + d] = acc[i] * inv;
  }
}

// One block per new token: copies its K and V rows (K only when v is null: a keys-only layer)
// into pool row slots[t].
template <typename T>
__global__ void __launch_bounds__(kKvWriteThreads)
    kv_write_kernel(T* keys, T* values, const float* k, const float* v, const int32_t* slots,
                    int64_t pool_rows, size_t kv_dim) {
  const size_t t = blockIdx.x;
  const int32_t slot = slots[t];
  if (slot < 0 || slot >= pool_rows) return;
  const size_t dst = static_cast<size_t>(slot) * kv_dim;
  const size_t src = t * kv_dim;
  for (size_t i = threadIdx.x; i < kv_dim; i += kKvWriteThreads) {
    keys[dst + i] = from_float<T>(k[src + i]);
  }
  if (v == nullptr) return;
  for (size_t i = threadIdx.x; i < kv_dim; i += kKvWriteThreads) {
    values[dst + i] = from_float<T>(v[src + i]);
  }
}

// INVALID_ARGUMENT unless the layer is non-empty and its float count fits in size_t.
Status check_kv_layer(const DeviceKvLayer& kv, const char* what) {
  if (kv.block_rows == 0 || kv.n_blocks == 0 || kv.kv_dim == 0) {
    return invalid_argument_error(
        std::string("CUDA ") + what + ": KV layer has a zero dimension (block_rows " +
        std::to_string(kv.block_rows) + ", n_blocks " + std::to_string(kv.n_blocks) + ", kv_dim " +
        std::to_string(kv.kv_dim) + ")");
  }
  size_t rows = 0;
  size_t floats = 0;
  if (__builtin_mul_overflow(kv.block_rows, kv.n_blocks, &rows) ||
      __builtin_mul_overflow(rows, kv.kv_dim, &floats) || rows > static_cast<size_t>(INT64_MAX)) {
    return invalid_argument_error(std::string("CUDA ") + what + ": KV layer size overflows");
  }
  if (kv.keys == nullptr || kv.values == nullptr) {
    return invalid_argument_error(std::string("CUDA ") + what + ": null KV pointer");
  }
  return Status();
}

// Launches attention_kernel<T> over the checked arguments of attention_enqueue.
template <typename T>
Status launch_attention(const float* q, const DeviceKvLayer& kv, const DeviceAttentionBatch& batch,
                        const DeviceAttentionShape& shape, size_t value_dim, float* out,
                        void* stream) {
  AttentionParams<T> p{};
  p.q = q;
  p.out = out;
  p.keys = static_cast<const T*>(kv.keys);
  p.values = static_cast<const T*>(kv.values);
  p.token_seq = batch.token_seq;
  p.token_pos = batch.token_pos;
  p.table_begin = batch.table_begin;
  p.tables = batch.tables;
  p.block_rows = static_cast<int64_t>(kv.block_rows);
  p.n_blocks = static_cast<int64_t>(kv.n_blocks);
  p.kv_dim = kv.kv_dim;
  p.n_heads = static_cast<int>(shape.n_heads);
  p.group = static_cast<int>(shape.n_heads / shape.n_kv_heads);
  p.head_dim = static_cast<int>(shape.head_dim);
  p.value_dim = static_cast<int>(value_dim);
  p.scale = shape.scale;
  p.window = static_cast<int64_t>(shape.window);
  p.sinks = shape.sinks;
  const auto blocks = static_cast<unsigned>(batch.n_tokens * shape.n_heads);
  TANDEM_CUDA_LAUNCH(blocks, kAttnThreads, static_cast<cudaStream_t>(stream), attention_kernel<T>)
  (p);
  return dense_internal::launch_status("attention");
}

}  // namespace

using dense_internal::launch_status;
using dense_internal::overlaps;

Status kv_write_enqueue(const DeviceKvLayer& layer, const float* k, const float* v,
                        const int32_t* slots, size_t n_tokens, void* stream) {
  TANDEM_RETURN_IF_ERROR(check_kv_layer(layer, "kv_write"));
  if (n_tokens > static_cast<size_t>(INT32_MAX)) {
    return invalid_argument_error("CUDA kv_write: " + std::to_string(n_tokens) +
                                  " tokens out of range");
  }
  if (n_tokens == 0) return Status();
  const bool keys_only = layer.values == layer.keys;
  if (k == nullptr || slots == nullptr || (v == nullptr) != keys_only) {
    return invalid_argument_error(
        "CUDA kv_write: null pointer (v must be null exactly for a keys-only layer)");
  }
  const auto pool_rows = static_cast<int64_t>(layer.block_rows * layer.n_blocks);
  const auto st = static_cast<cudaStream_t>(stream);
  if (layer.type == KvType::kF16) {
    TANDEM_CUDA_LAUNCH(static_cast<unsigned>(n_tokens), kKvWriteThreads, st,
                       kv_write_kernel<__half>)
    (static_cast<__half*>(layer.keys), static_cast<__half*>(layer.values), k, v, slots, pool_rows,
     layer.kv_dim);
  } else {
    TANDEM_CUDA_LAUNCH(static_cast<unsigned>(n_tokens), kKvWriteThreads, st, kv_write_kernel<float>)
    (static_cast<float*>(layer.keys), static_cast<float*>(layer.values), k, v, slots, pool_rows,
     layer.kv_dim);
  }
  return launch_status("kv_write");
}

Status attention_enqueue(const float* q, const DeviceKvLayer& kv, const DeviceAttentionBatch& batch,
                         const DeviceAttentionShape& shape, float* out, void* stream) {
  const size_t value_dim = shape.value_dim != 0 ? shape.value_dim : shape.head_dim;
  if (shape.n_heads == 0 || shape.n_kv_heads == 0 || shape.head_dim == 0 ||
      shape.head_dim > kMaxAttentionKeyDim || value_dim > kMaxAttentionValueDim ||
      value_dim > shape.head_dim || shape.n_heads % shape.n_kv_heads != 0 ||
      shape.n_heads > static_cast<size_t>(INT32_MAX)) {
    return invalid_argument_error(
        "CUDA attention: n_heads " + std::to_string(shape.n_heads) + ", n_kv_heads " +
        std::to_string(shape.n_kv_heads) + ", head_dim " + std::to_string(shape.head_dim) +
        ", value_dim " + std::to_string(value_dim) +
        " (need n_heads a multiple of n_kv_heads, 0 < head_dim <= " +
        std::to_string(kMaxAttentionKeyDim) +
        ", value_dim <= head_dim and <= " + std::to_string(kMaxAttentionValueDim) + ")");
  }
  TANDEM_RETURN_IF_ERROR(check_kv_layer(kv, "attention"));
  // Separate values share the keys' row layout, head by head; narrower values exist only as the
  // leading floats of the key rows.
  if (kv.values != kv.keys && value_dim != shape.head_dim) {
    return invalid_argument_error(
        "CUDA attention: value_dim differs from head_dim but the layer stores its own values");
  }
  if (kv.kv_dim != shape.n_kv_heads * shape.head_dim) {
    return invalid_argument_error("CUDA attention: KV row of " + std::to_string(kv.kv_dim) +
                                  " floats, expected n_kv_heads * head_dim = " +
                                  std::to_string(shape.n_kv_heads * shape.head_dim));
  }
  if (shape.window > static_cast<size_t>(INT64_MAX)) {
    return invalid_argument_error("CUDA attention: window " + std::to_string(shape.window) +
                                  " out of range");
  }
  if (batch.n_tokens > static_cast<size_t>(INT32_MAX) / shape.n_heads) {
    return invalid_argument_error("CUDA attention: " + std::to_string(batch.n_tokens) +
                                  " tokens x " + std::to_string(shape.n_heads) +
                                  " heads out of range");
  }
  if (batch.n_tokens == 0) return Status();
  if (q == nullptr || out == nullptr || batch.token_seq == nullptr || batch.token_pos == nullptr ||
      batch.table_begin == nullptr || batch.tables == nullptr) {
    return invalid_argument_error("CUDA attention: null pointer");
  }
  const size_t q_bytes = batch.n_tokens * shape.n_heads * shape.head_dim * sizeof(float);
  const size_t out_bytes = batch.n_tokens * shape.n_heads * value_dim * sizeof(float);
  if (overlaps(q, q_bytes, out, out_bytes)) {
    return invalid_argument_error("CUDA attention: out overlaps q");
  }
  if (kv.type == KvType::kF16) {
    return launch_attention<__half>(q, kv, batch, shape, value_dim, out, stream);
  }
  return launch_attention<float>(q, kv, batch, shape, value_dim, out, stream);
}

}  // namespace tandem::kernels::cuda
