// Dense forward-pass kernels on a CUDA device: matmul, RMSNorm, RoPE, element-wise ops, the paged
// KV write and causal GQA attention over a paged KV pool (the non-expert parts of a layer).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "kernels/cpu/kv_type.h"
#include "kernels/tensor_type.h"

namespace tandem::kernels {
struct RopeConfig;  // kernels/cpu/rope.h
}  // namespace tandem::kernels

namespace tandem::kernels::cuda {

// Conventions of every function below:
// - Pointers are DEVICE pointers owned by the caller; they must stay valid until the stream has
//   run the work. `stream` is a cudaStream_t passed as void* (null = the default stream).
// - Functions only enqueue (asynchronous). They return INVALID_ARGUMENT for sizes the kernels do
//   not take (zero dimensions, null pointers, unsupported types, a weight row that is not a whole
//   number of its type's blocks, e.g. 32 elements for Q8_0, 256 for Q4_K) and INTERNAL naming the
//   CUDA error when a launch is refused; faults inside a kernel surface at the caller's next
//   synchronisation.
// - Arithmetic is float; results match the CPU references of kernels/cpu to float rounding (sums
//   are reduced in a different order), not bit for bit.
// - Any host thread that owns the stream may call them.

// A weight matrix in device memory, in the row layout of kernels::WeightMatrix: row r at
// data + r * tensor_type_bytes(type, cols), rows x cols.
struct DeviceMatrix {
  TensorType type = TensorType::kF32;
  const void* data = nullptr;
  size_t rows = 0;
  size_t cols = 0;
};

// Whether matmul_enqueue takes weights of `type`: the types of kCudaWeightTypes
// (cuda_weight_types.h), dequantized in-kernel to exactly the floats of kernels::dequantize().
// w.data must be aligned to the type's CudaWeightType::alignment (at most 4 bytes).
bool dense_matmul_supports(TensorType type);

// y[t * w.rows + r] = sum_c x[t * w.cols + c] * W[r][c] for t < n_tokens (float accumulation).
// x [n_tokens x cols], y [n_tokens x rows]; y must not overlap x. Efficient for one token (decode,
// one warp-parallel dot product per output) as well as for many (tiled).
Status matmul_enqueue(const DeviceMatrix& w, const float* x, size_t n_tokens, float* y,
                      void* stream);

// n_batches matrices of w.rows x w.cols, back to back in w.data (matrix b's rows start at byte
// b * w.rows * row_bytes), each applied to its own column range of x and y: MLA's per-head
// k_b / v_b. Strides in floats; 0 = dense (x_ld = cols, y_ld = rows, a batch after the other).
struct MatmulBatch {
  size_t n_batches = 1;  // at most 65535
  size_t x_ld = 0;       // token t's input row starts at x + t * x_ld
  size_t x_batch = 0;    // batch b's input columns start b * x_batch further
  size_t y_ld = 0;
  size_t y_batch = 0;
};

// y[t * y_ld + b * y_batch + r] = sum_c x[t * x_ld + b * x_batch + c] * W_b[r][c], for t <
// n_tokens, b < n_batches, r < rows, c < cols (matmul_enqueue's arithmetic). A batch's rows must
// not overlap its columns (cols <= x_batch and rows <= y_batch when n_batches > 1; cols <= x_ld
// and rows <= y_ld), and the spans of y must not overlap those of x.
Status batched_matmul_enqueue(const DeviceMatrix& w, const MatmulBatch& batch, const float* x,
                              size_t n_tokens, float* y, void* stream);

// For each of n_rows rows of dim floats: out = x * (1 / sqrt(mean(x^2) + eps)) * weight[dim]
// (kernels::rms_norm). x == out allowed (in place). Per-head norm: n_rows = n_tokens * n_heads and
// dim = head_dim (the rows of a [tokens x heads x head_dim] tensor are its heads).
Status rms_norm_enqueue(const float* x, const float* weight, float eps, size_t n_rows, size_t dim,
                        float* out, void* stream);

// The same over rows that start `stride` floats apart (stride >= dim): the first dim floats of
// each; the rest pass unchanged (MLA's compressed KV, normed before its RoPE part).
Status rms_norm_strided_enqueue(const float* x, const float* weight, float eps, size_t n_rows,
                                size_t dim, size_t stride, float* out, void* stream);

// y[t * dim + i] += bias[i] for t < n_rows, i < dim (Qwen2-MoE's q/k/v biases).
Status add_row_enqueue(float* y, const float* bias, size_t n_rows, size_t dim, void* stream);

// out[i] = a[i] + b[i] for i < n; out may be a or b.
Status add_enqueue(const float* a, const float* b, size_t n, float* out, void* stream);

// out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i]; out may be gate or up.
Status silu_mul_enqueue(const float* gate, const float* up, size_t n, float* out, void* stream);

// rows[t * dim + i] *= 1 / (1 + exp(-logit[t])) for t < n_rows (Qwen2-MoE's shared-expert gate).
Status scale_rows_by_sigmoid_enqueue(float* rows, const float* logit, size_t n_rows, size_t dim,
                                     void* stream);

// RoPE in place, as kernels::rope (the arithmetic spelt out in kernels/cpu/rope.h, YaRN included):
// x [n_tokens x n_heads x head_dim], positions [n_tokens]. neox: pairs (i, i + rot_dims / 2);
// otherwise (2i, 2i + 1). inv_freq_i = freq_base^(-2i / rot_dims) (computed in double, rounded to
// float), theta_e = float(pos) * inv_freq_i, theta_i = freq_scale * theta_e; with ext_factor != 0
// (YaRN) theta = theta_i * (1 - mix_i) + theta_e * mix_i, mix_i = ext_factor * (1 - clamp((i -
// corr_low) / max(0.001, corr_high - corr_low), 0, 1)), else theta = theta_i; then
// c = float(cos(double(theta)) * mscale), s likewise. rot_dims even, 0 < rot_dims, offset +
// rot_dims <= head_dim: the pairs are those of dims [offset, offset + rot_dims) of each head (MLA's
// RoPE part at the end of a row); the other dims pass unchanged. The host computes corr_low /
// corr_high (kernels:: rope_yarn_corr_dims) and mscale (attn_factor, times YaRN's 1 + 0.1 ln(1 /
// freq_scale)) once: device_rope() below.
struct DeviceRope {
  bool neox = true;
  size_t head_dim = 0;
  size_t rot_dims = 0;
  float freq_base = 10000.0f;
  size_t offset = 0;  // first rotated dim of each head
  float freq_scale = 1.0f;
  float ext_factor = 0.0f;
  float corr_low = 0.0f;
  float corr_high = 0.0f;
  double mscale = 1.0;
};
// The DeviceRope of a CPU RopeConfig (kernels::rope's arithmetic): YaRN's correction range from
// kernels::rope_yarn_corr_dims and the cos/sin scale, both as kernels::rope computes them; offset
// 0. The config's checks (even rot_dims and so on) are rope_enqueue's. Plain host code; any thread.
DeviceRope device_rope(const RopeConfig& config);

Status rope_enqueue(float* x, size_t n_tokens, size_t n_heads, const int32_t* positions,
                    const DeviceRope& rope, void* stream);

// One layer of a paged KV pool in device memory, laid out as runtime::KvPool lays out host memory:
// block b's K rows start at element b * block_rows * kv_dim of keys (values likewise); row j of a
// block is position (its table index) * block_rows + j of the owning sequence; kv_dim =
// n_kv_heads * head_dim elements per row. Elements are `type`: f32, or f16 (IEEE halves, as
// kernels::store_kv_elements writes them). Keys only (MLA: the values are the leading value_dim
// elements of each key row): values == keys.
struct DeviceKvLayer {
  void* keys = nullptr;
  void* values = nullptr;
  size_t block_rows = 0;
  size_t n_blocks = 0;
  size_t kv_dim = 0;
  KvType type = KvType::kF32;
};

// Writes K/V rows of n_tokens new tokens into the pool: token t goes to pool row slots[t] = block
// id * block_rows + row within the block (computed by the caller from the token's sequence block
// table and position; slots [n_tokens] device int32, each < n_blocks * block_rows).
// k, v: [n_tokens x kv_dim] floats; v null for a keys-only layer (values == keys), which takes k
// only. An f16 layer stores each float rounded to the nearest half, ties to even (overflow to
// infinity), the bits kernels::store_kv_elements gives on the host.
Status kv_write_enqueue(const DeviceKvLayer& layer, const float* k, const float* v,
                        const int32_t* slots, size_t n_tokens, void* stream);

// The query tokens of a batch of sequences. Token t belongs to sequence token_seq[t] and sits at
// position token_pos[t] of it; it attends (causally) to that sequence's positions 0 ..
// token_pos[t], read through the sequence's block table: tables[table_begin[s] + p / block_rows]
// holds the block id of position p. All arrays are device int32.
struct DeviceAttentionBatch {
  size_t n_tokens = 0;
  const int32_t* token_seq = nullptr;    // [n_tokens]
  const int32_t* token_pos = nullptr;    // [n_tokens]
  const int32_t* table_begin = nullptr;  // [n_seqs]
  const int32_t* tables = nullptr;       // all sequences' block tables, back to back
};

// The widest query/key and value heads attention_enqueue takes: MLA's latent row (DeepSeek-V3:
// 512 + 64) and latent values.
inline constexpr size_t kMaxAttentionKeyDim = 640;
inline constexpr size_t kMaxAttentionValueDim = 512;

struct DeviceAttentionShape {
  size_t n_heads = 0;     // query heads
  size_t n_kv_heads = 0;  // n_heads % n_kv_heads == 0; query head h reads kv head h / (n_heads /
                          // n_kv_heads)
  size_t head_dim = 0;    // of queries and keys, at most kMaxAttentionKeyDim
  float scale = 0.0f;     // score scale (1 / sqrt(head_dim))
  // Floats of each head's value and output: 0 = head_dim (at most kMaxAttentionValueDim). MLA:
  // the latent width, whose values are the leading value_dim floats of each key row.
  size_t value_dim = 0;
  // Sliding window: a token at position p attends to positions max(0, p - window + 1) .. p
  // (itself included); 0 = every earlier position (kernels::AttentionConfig::window).
  size_t window = 0;
  // Attention sinks (GPT-OSS): one raw logit per query head [n_heads] (device floats) that takes
  // part in the softmax and adds no value; null = none (kernels::AttentionConfig::sinks).
  const float* sinks = nullptr;
};

// out[t][h] = sum_p softmax_p(scale * q[t][h] . k_p) v_p over positions p = 0 .. token_pos[t] of
// token t's sequence, or its last `window` positions, the softmax's denominator also holding
// exp(sinks[h]) where the model has sinks (kernels::attention_heads). q [n_tokens x n_heads x
// head_dim], out [n_tokens x n_heads x value_dim]; out must not overlap q. An f16 layer's elements
// are read as their exact float values. The K/V rows of every
// attended position must have been written (kv_write_enqueue of this layer for the batch's own new
// tokens comes first on the same stream).
Status attention_enqueue(const float* q, const DeviceKvLayer& kv, const DeviceAttentionBatch& batch,
                         const DeviceAttentionShape& shape, float* out, void* stream);

}  // namespace tandem::kernels::cuda
