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
  // Per model layer: its index among the mirrored layers, or (window rings) -1 with its index
  // among the rings in ring_of_layer; the rings start kv_ring_offset bytes into kv, each plane
  // ring_plane_bytes, ring_blocks blocks in all (slots x blocks per ring).
  std::vector<int32_t> mirror_of_layer, ring_of_layer;
  size_t kv_ring_offset = 0;
  size_t ring_plane_bytes = 0;
  size_t ring_blocks = 0;
  size_t ring_tables_at = 0;  // this pass's ring tables: tables + ring_tables_at
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
  bool in_ring(size_t layer) const { return ring_of_layer[layer] >= 0; }
  // Layer `layer` of the KV mirror or, for a windowed layer with window rings, of the rings (the
  // pool's block rows and element type; values == keys when keys only).
  kernels::cuda::DeviceKvLayer kv_layer(size_t layer, const KvPool& pool) const {
    kernels::cuda::DeviceKvLayer l;
    const bool ring = in_ring(layer);
    const size_t plane = ring ? ring_plane_bytes : kv_plane_bytes;
    uint8_t* keys =
        ring ? kv + kv_ring_offset + kv_planes * static_cast<size_t>(ring_of_layer[layer]) * plane
             : kv + kv_planes * static_cast<size_t>(mirror_of_layer[layer]) * plane;
    l.keys = keys;
    l.values = kv_planes == 2 ? keys + plane : keys;
    l.block_rows = pool.block_tokens();
    l.n_blocks = ring ? ring_blocks : pool.n_blocks();
    l.kv_dim = pool.kv_dim();
    l.type = kv_type;
    return l;
  }
  // Where this pass's new rows of `layer` go (begin() uploaded them).
  const int32_t* kv_slots(size_t layer) const { return i(in_ring(layer) ? s.ring_slots : s.slots); }
  // The current pass's tokens as the attention kernel reads them for `layer` (begin() uploaded
  // them).
  kernels::cuda::DeviceAttentionBatch attention_batch(size_t n_tokens, size_t layer) const {
    kernels::cuda::DeviceAttentionBatch b;
    b.n_tokens = n_tokens;
    b.token_seq = i(s.token_seq);
    b.token_pos = i(s.positions);
    b.table_begin = i(s.table_begin);
    b.tables = in_ring(layer) ? tables + ring_tables_at : tables;
    return b;
  }
};

}  // namespace tandem::runtime
