// CudaDenseExecutor::Device (internal to the executor's files): the device memory, stream and
// staging one executor owns, with typed views of its scratch regions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "engine/runtime/cuda_dense_executor.h"
#include "engine/runtime/paged_kv_cache.h"
#include "kernels/cuda/dense_ops.h"

namespace tandem::runtime {

// Everything on the device (and the pinned staging), freed on destruction.
struct CudaDenseExecutor::Device {
  int device = 0;
  cudaStream_t stream = nullptr;
  uint8_t* weights = nullptr;
  uint8_t* kv = nullptr;  // the mirror: elements of kv_type
  uint8_t* scratch = nullptr;
  uint8_t* pinned = nullptr;
  // The block-table buffers: inside scratch / pinned until a batch needs more (then owned).
  int32_t* tables = nullptr;
  int32_t* pin_tables = nullptr;
  void* own_tables = nullptr;
  void* own_pin_tables = nullptr;
  size_t table_capacity = 0;

  std::vector<DeviceLayerRefs> layers;
  DeviceVectorRef output_norm;
  DeviceMatrixRef lm_head;
  DeviceScratchLayout s;
  size_t kv_plane_bytes = 0;                        // n_blocks * block_tokens * kv_dim elements
  size_t kv_planes = 2;                             // K and V per layer, or K only (MLA)
  kernels::KvType kv_type = kernels::KvType::kF32;  // the host pool's
  size_t n_seqs = 0;

  ~Device() {
    cudaSetDevice(device);
    if (stream != nullptr) cudaStreamSynchronize(stream);
    for (void* p : {static_cast<void*>(weights), static_cast<void*>(kv),
                    static_cast<void*>(scratch), own_tables}) {
      if (p != nullptr) cudaFree(p);
    }
    for (void* p : {static_cast<void*>(pinned), own_pin_tables}) {
      if (p != nullptr) cudaFreeHost(p);
    }
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  float* f(uint64_t offset) const { return reinterpret_cast<float*>(scratch + offset); }
  int32_t* i(uint64_t offset) const { return reinterpret_cast<int32_t*>(scratch + offset); }
  float* pf(uint64_t offset) const { return reinterpret_cast<float*>(pinned + offset); }
  int32_t* pi(uint64_t offset) const { return reinterpret_cast<int32_t*>(pinned + offset); }
  const float* vec(const DeviceVectorRef& r) const {
    return reinterpret_cast<const float*>(weights + r.offset);
  }
  kernels::cuda::DeviceMatrix mat(const DeviceMatrixRef& r) const {
    return kernels::cuda::DeviceMatrix{r.type, weights + r.offset, r.rows, r.cols};
  }
  // Layer `layer` of the KV mirror (the pool's block geometry and element type; values == keys
  // when keys only).
  kernels::cuda::DeviceKvLayer kv_layer(size_t layer, const KvPool& pool) const {
    kernels::cuda::DeviceKvLayer l;
    uint8_t* keys = kv + kv_planes * layer * kv_plane_bytes;
    l.keys = keys;
    l.values = kv_planes == 2 ? keys + kv_plane_bytes : keys;
    l.block_rows = pool.block_tokens();
    l.n_blocks = pool.n_blocks();
    l.kv_dim = pool.kv_dim();
    l.type = kv_type;
    return l;
  }
  // The current pass's tokens as the attention kernel reads them (begin() uploaded them).
  kernels::cuda::DeviceAttentionBatch attention_batch(size_t n_tokens) const {
    kernels::cuda::DeviceAttentionBatch b;
    b.n_tokens = n_tokens;
    b.token_seq = i(s.token_seq);
    b.token_pos = i(s.positions);
    b.table_begin = i(s.table_begin);
    b.tables = tables;
    return b;
  }
};

}  // namespace tandem::runtime
