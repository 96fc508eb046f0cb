// Grouped expert FFN on a CUDA device: SwiGLU MLPs (biased, clamped) of many experts per launch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "kernels/tensor_type.h"

namespace tandem::kernels::cuda {

// Whether the grouped FFN kernels take weights of `type`: the types of kCudaWeightTypes
// (cuda_weight_types.h), dequantized in-kernel to exactly the floats of kernels::dequantize().
bool expert_ffn_supports(TensorType type);

// The nonlinearity between the gate/up and the down stage, for gate result g and up result u
// (biases included). The kernels' own enum: a caller maps its model's activation to it.
//  kSwiGlu:    h = g / (1 + exp(-g)) * u (silu(g) * u).
//  kSwiGluOai: GPT-OSS's clamped SwiGLU with kernels::swiglu_oai_mul's constants (alpha 1.702,
//              limit 7): g' = min(g, 7), u' = clamp(u, -7, 7), h = g' / (1 + exp(alpha * -g'))
//              * (u' + 1), in that order.
enum class ExpertFfnActivation { kSwiGlu, kSwiGluOai };

// One expert's three matrices in device memory, each in the ggml/torch row layout of
// kernels::WeightMatrix (row r at r * tensor_type_bytes(type, cols)): gate and up [ffn x hidden],
// down [hidden x ffn], and its optional float biases (null = none): gate_bias and up_bias [ffn],
// added to the gate and up results before the activation, down_bias [hidden], added to the down
// result before the row scale. Device pointers; the caller owns the allocations, the matrices
// aligned to the type's CudaWeightType::alignment (at most 4 bytes; cudaMalloc gives 256), the
// biases to 4 bytes.
struct DeviceExpert {
  const void* gate = nullptr;
  const void* up = nullptr;
  const void* down = nullptr;
  const float* gate_bias = nullptr;
  const float* up_bias = nullptr;
  const float* down_bias = nullptr;
};

// A group of experts of one layer and the rows routed to each. Every pointer below is a DEVICE
// pointer owned by the caller; all must stay valid until the stream has run the launches.
//
// Rows are grouped by expert: expert slot i owns rows [row_offsets[i], row_offsets[i + 1]).
// Row r reads its input from x[row_input[r] * hidden ...] (the token's hidden state, so the
// caller does not gather), and stage results go to h (row r at r * ffn) and out (row r at
// r * hidden).
struct ExpertFfnGroup {
  TensorType gate_type = TensorType::kF32;
  TensorType up_type = TensorType::kF32;
  TensorType down_type = TensorType::kF32;
  ExpertFfnActivation activation = ExpertFfnActivation::kSwiGlu;
  size_t hidden = 0;
  size_t ffn = 0;
  size_t n_experts = 0;                   // experts in the group (slots)
  size_t n_rows = 0;                      // == row_offsets[n_experts]
  const DeviceExpert* experts = nullptr;  // [n_experts]
  // The (expert slot, first row, row count) work items, one per tile of at most
  // kExpertFfnRowTile rows of one expert; build with make_expert_ffn_tiles on the host.
  const uint32_t* tiles = nullptr;  // [n_tiles x 3]
  size_t n_tiles = 0;
  const uint32_t* row_input = nullptr;  // [n_rows]: the x row each row reads
  const float* row_scale = nullptr;     // [n_rows] or null (scale 1): out row = scale * down(..)
  const float* x = nullptr;             // [* x hidden]
  float* h = nullptr;                   // [n_rows x ffn] scratch
  float* out = nullptr;                 // [n_rows x hidden]
};

// Rows per work item (a token tile of one expert).
inline constexpr size_t kExpertFfnRowTile = 8;

// Fills tiles (3 uint32 per tile, host memory) for experts whose rows start at
// row_offsets[0..n_experts] (host memory, n_experts + 1 entries, non-decreasing). Returns the
// number of tiles written; `tiles` must hold 3 * max_expert_ffn_tiles(n_rows, n_experts) entries.
size_t make_expert_ffn_tiles(const size_t* row_offsets, size_t n_experts, uint32_t* tiles);
inline size_t max_expert_ffn_tiles(size_t n_rows, size_t n_experts) {
  return n_rows / kExpertFfnRowTile + n_experts;
}

// Enqueues on `stream` (a cudaStream_t passed as void*; null = the default stream):
//   stage 1, one launch over all (tile, ffn block) pairs:
//     h[r] = act(gate x + gate_bias, up x + up_bias)  (act: group.activation)
//   stage 2, one launch over all (tile, hidden block) pairs:
//     out[r] = scale[r] * (down h[r] + down_bias)
// (a missing bias adds nothing). Weights are dequantized in-kernel; arithmetic is float, each bias
// added to the finished dot product as CpuExpertWorker adds it. Asynchronous: errors of the
// kernels themselves show up at the next synchronisation. INVALID_ARGUMENT for an unsupported
// activation, an unsupported type or inconsistent sizes (hidden/ffn 0, a dimension that is not a
// whole number of its type's blocks: hidden for gate/up, ffn for down, e.g. a multiple of 32 for
// Q8_0, of 256 for Q4_K); INTERNAL with the CUDA error when a launch is refused. Any host thread
// that owns the stream.
Status expert_ffn_enqueue(const ExpertFfnGroup& group, void* stream);

// Optional combine, for callers that want token rows rather than pair rows: for each token t,
// token_out[t] = sum over slots s = 0..k-1 in order of out[pair_row[t * k + s]] (rows with
// pair_row == UINT32_MAX are skipped; a token with none gets zeros). Deterministic (no atomics).
// Device pointers: pair_row [n_tokens * k], out [* x hidden], token_out [n_tokens x hidden].
Status expert_ffn_combine_enqueue(const uint32_t* pair_row, const float* out, size_t n_tokens,
                                  size_t k, size_t hidden, float* token_out, void* stream);

}  // namespace tandem::kernels::cuda
