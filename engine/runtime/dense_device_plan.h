// DenseDevicePlan: where CudaDenseExecutor puts every dense weight, the KV mirror and its scratch
// in device memory, computed without a device (so startup can budget memory before any CUDA call).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/model/model.h"
#include "engine/runtime/dense_executor.h"
#include "engine/runtime/prepared_weights.h"
#include "kernels/cpu/kv_type.h"
#include "kernels/tensor_type.h"

namespace tandem::runtime {

// The KV pool geometry a device mirror copies (runtime::KvPool's). n_layers is the pool's: every
// model layer, or for a model with sliding-window layers possibly its full-attention layers only
// (the scheduler's pool, KvLayerLayout::n_full); the mirror holds every model layer either way, in
// the pool's element type.
// With rings (slots > 0; a pool of the full layers only) the windowed layers live in the
// executor's window rings instead (DenseExecutor::window_rings) and the mirror holds the pool's
// layers.
struct KvGeometry {
  size_t n_layers = 0;
  size_t kv_dim = 0;
  size_t block_tokens = 0;
  size_t n_blocks = 0;
  kernels::KvType type = kernels::KvType::kF32;
  DeviceWindowRings rings = {};
};

// Device bytes by kind. A plain value.
struct CudaDenseBytes {
  uint64_t dense_weights = 0;  // every dense matrix and vector but the token embedding
  // The KV mirror: (2, or 1 for keys-only MLA) x mirrored layers x n_blocks x block_tokens x
  // kv_dim elements of the pool's type (4 or 2 bytes), the mirrored layers being every model
  // layer, or the pool's with window rings; then the rings: 2 x windowed layers x slots x ring
  // blocks x block_tokens x kv_dim elements.
  uint64_t kv = 0;
  uint64_t scratch = 0;  // activations and index arrays for max_batch_tokens tokens
  uint64_t total() const { return dense_weights + kv + scratch; }
};

inline constexpr uint64_t kNoTensor = std::numeric_limits<uint64_t>::max();
// Every region starts at a multiple of this many bytes within its buffer.
inline constexpr uint64_t kDeviceAlign = 256;
// Logits are computed this many rows at a time (bounds the logits scratch to rows x n_vocab).
inline constexpr size_t kLogitsChunkRows = 32;

// A weight in the weights buffer (offset kNoTensor: absent).
struct DeviceMatrixRef {
  uint64_t offset = kNoTensor;
  TensorType type = TensorType::kF32;
  size_t rows = 0;
  size_t cols = 0;
  bool present() const { return offset != kNoTensor; }
};
struct DeviceVectorRef {
  uint64_t offset = kNoTensor;  // floats
  size_t n = 0;
  bool present() const { return offset != kNoTensor; }
};

// A layer's weights on the device, by WeightRole (absent refs where the layer has none): every
// RoleUse::kMatrix and kVector role of the layer_roles() table that the layer has.
struct DeviceLayerRefs {
  std::array<DeviceMatrixRef, model::kWeightRoleCount> matrices;
  std::array<DeviceVectorRef, model::kWeightRoleCount> vectors;
  // MLA (RoleUse::kHeadMatrices): PreparedLayer::k_b / v_b, one matrix per head back to back
  // (rows and cols of one head's matrix; head j's rows start j * rows rows further), as
  // kernels::cuda::batched_matmul_enqueue takes them. Absent for other attention kinds.
  DeviceMatrixRef k_b, v_b;
  bool moe = false;

  const DeviceMatrixRef& matrix(model::WeightRole role) const {
    return matrices[static_cast<size_t>(role)];
  }
  const DeviceVectorRef& vector(model::WeightRole role) const {
    return vectors[static_cast<size_t>(role)];
  }
};

// One host -> device copy into the weights buffer.
struct DeviceUpload {
  std::string name;  // the checkpoint's tensor name
  const void* host = nullptr;
  uint64_t bytes = 0;
  uint64_t offset = 0;
  bool matrix = false;
  TensorType type = TensorType::kF32;  // of a matrix (vectors are uploaded as float)
  size_t cols = 0;                     // of a matrix
};

// Byte offsets of the scratch regions within the scratch buffer (floats unless noted).
struct DeviceScratchLayout {
  uint64_t x = 0, h = 0, tmp = 0, shared = 0;  // [T x hidden]
  uint64_t q = 0, attn = 0;                    // [T x q_dim]
  uint64_t k = 0, v = 0;                       // [T x kv_dim]
  uint64_t ffn_a = 0, ffn_b = 0;               // [T x ffn_max] (absent when ffn_max is 0)
  uint64_t router = 0;                         // [T x n_experts]
  uint64_t gate_logit = 0;                     // [T]
  // MLA only (empty otherwise): the low-rank query [T x q_lora_rank], the projected query
  // [T x n_heads x (nope + rope)] and the heads' values [T x n_heads x v_head].
  uint64_t mla_qa = 0, mla_q = 0, mla_heads = 0;
  uint64_t head_rows = 0;  // [chunk x hidden]
  uint64_t logits = 0;     // [chunk x n_vocab]
  // int32: [T] each, and tables [table_capacity].
  uint64_t positions = 0, token_seq = 0, slots = 0, table_begin = 0, tables = 0;
  uint64_t ring_slots = 0;    // [T] with window rings (the windowed layers' KV slots)
  size_t table_capacity = 0;  // n_blocks + T entries, twice that with window rings (their tables
                              // follow the block tables)
  // Byte offsets within the pinned host block: activations [T x hidden], router logits
  // [T x n_experts], one logits chunk, int32 [5 x T] (positions, token_seq, slots, table_begin,
  // ring slots) and the tables [table_capacity].
  uint64_t pin_act = 0, pin_router = 0, pin_logits = 0, pin_ints = 0, pin_tables = 0;
  size_t ffn_max = 0;
  size_t logit_chunk = 0;  // min(T, kLogitsChunkRows)
};

// The whole plan. Owns the PreparedWeights the uploads point into (float norms and biases; the
// matrices point into the checkpoint, which must outlive the plan).
struct DenseDevicePlan {
  PreparedWeights prepared;
  std::vector<DeviceUpload> uploads;
  std::vector<DeviceLayerRefs> layers;
  DeviceVectorRef output_norm;
  DeviceMatrixRef lm_head;
  DeviceScratchLayout scratch;
  size_t max_batch_tokens = 0;
  CudaDenseBytes bytes;
  // Page-locked host staging (not device memory): activations, router logits, logits, ints.
  uint64_t pinned_bytes = 0;
  // Within the KV allocation: the rings start after the mirror (mirror bytes); per plane (K or V)
  // of one layer, mirror_plane_bytes (n_blocks x block_tokens x kv_dim elements) and
  // ring_plane_bytes (slots x ring blocks x block_tokens x kv_dim elements; 0 without rings).
  uint64_t kv_ring_offset = 0;
  uint64_t mirror_plane_bytes = 0;
  uint64_t ring_plane_bytes = 0;
};

// Lays out the dense weights of (spec, weights), a KV mirror of `kv` and scratch for
// max_batch_tokens tokens. With PrepareUse::kLayout the plan is for its bytes, offsets and types
// only: the uploads of weights prepare_weights does not make then (the legacy attn_kv_b layout's
// F32 key heads) have no host data. INVALID_ARGUMENT for a zero max_batch_tokens or KV dimension,
// a KV geometry of another model, or sizes that overflow; the errors of prepare_weights. Any
// thread.
Result<DenseDevicePlan> plan_dense_device(const model::ModelSpec& spec,
                                          const model::ModelWeights& weights, const KvGeometry& kv,
                                          size_t max_batch_tokens,
                                          PrepareUse use = PrepareUse::kCompute);

// "" when every matrix of plan.uploads has a type the CUDA dense kernels take, in whole blocks per
// row (kernels/cuda/cuda_weight_types.h); otherwise why not, naming the first tensor that does not
// ("tensor 'blk.0.attn_q.weight' has type iq2_xxs, which the CUDA dense kernels do not take
// (supported: ...)"). No device needed: tandemd asks before it chooses where the dense parts run.
std::string cuda_dense_unsupported_tensor(const DenseDevicePlan& plan);

// The device bytes CudaDenseExecutor::create allocates for these inputs (plan_dense_device's
// bytes, from a kLayout plan): weights and KV exact, scratch as allocated at creation (the
// block-table region grows later only for batches whose tables share blocks, i.e. forks). No
// device needed.
Result<CudaDenseBytes> estimate_cuda_dense_bytes(const model::ModelSpec& spec,
                                                 const model::ModelWeights& weights,
                                                 const KvGeometry& kv, size_t max_batch_tokens);

}  // namespace tandem::runtime
