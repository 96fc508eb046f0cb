// DenseExecutor: the interface through which ModelRunner runs the dense parts of its forward pass
// (attention, norms, router, shared experts, dense FFNs, the head) layer by layer, on the host
// (CpuDenseExecutor) or on a device (CudaDenseExecutor), while routing and the routed experts
// stay with the runner. One layer loop drives either.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include <string>

#include "base/status.h"
#include "engine/model/model_spec.h"
#include "engine/runtime/batch.h"
#include "engine/runtime/kv_block_allocator.h"
#include "engine/runtime/paged_kv_cache.h"

namespace tandem::runtime {

// One sequence of a DenseBatch: its new tokens are batch tokens [first_token, first_token +
// n_tokens) at positions start_pos .. start_pos + n_tokens - 1; its block table is
// DenseBatch::tables[table_begin .. table_begin + table_size) (block ids in position order,
// covering at least positions [0, start_pos + n_tokens)).
struct DenseSequence {
  size_t first_token = 0;
  size_t n_tokens = 0;
  size_t start_pos = 0;
  size_t table_begin = 0;
  size_t table_size = 0;
};

// The batch of one forward pass as the executor sees it. Every span is the caller's and valid only
// during begin(), except `host`, valid until the pass ends; the executor copies what it keeps.
// Tokens are in batch order (all of sequence 0's, then sequence 1's, ...). int32 arrays are laid
// out as kernels::cuda::DeviceAttentionBatch wants them, so a device executor can upload them as
// they are. kv_slots, table_begin, tables and the seqs' table fields are filled only for an
// executor with a mirrored pool (empty / 0 otherwise).
struct DenseBatch {
  size_t n_tokens = 0;
  // The sequences with their host KV caches (prepared for positions [0, start_pos + n_tokens)):
  // an executor without a mirrored pool writes and reads K/V through them.
  std::span<const SequenceInput> host;
  std::span<const float> x;              // [n_tokens x hidden]: the token embeddings
  std::span<const int32_t> positions;    // [n_tokens]: each token's position in its sequence
  std::span<const int32_t> token_seq;    // [n_tokens]: each token's sequence index
  std::span<const int32_t> kv_slots;     // [n_tokens]: pool row block * block_tokens + pos % bt
  std::span<const int32_t> table_begin;  // [n_seqs]: offset of each sequence's table in `tables`
  std::span<const int32_t> tables;       // every sequence's block table, back to back
  std::span<const DenseSequence> seqs;   // [n_seqs]
  // For an executor with window rings (DenseExecutor::window_rings), the sliding-window layers'
  // addresses (empty otherwise): ring_slots [n_tokens] as kv_slots, ring_tables laid out as
  // tables (the same table_begin and sizes), entry i of sequence s being ring block
  // ring * blocks + i % blocks of its WindowedKvCache's device_ring().
  std::span<const int32_t> ring_slots;
  std::span<const int32_t> ring_tables;
};

// The rings a device executor keeps for a model's sliding-window layers instead of mirroring them
// at the full layers' block ids: `slots` rings (one per live sequence: WindowedKvCache::
// device_ring), each of `blocks` blocks of the pool's block_tokens positions per windowed layer
// (device_window_ring_blocks for passes of up to pass_tokens tokens of one sequence). slots 0:
// none.
struct DeviceWindowRings {
  size_t slots = 0;
  size_t blocks = 0;
  size_t pass_tokens = 0;
};

// Runs one forward pass's dense work for ModelRunner. The executor keeps the residual stream
// x [n_tokens x hidden]. Its K/V live either in the sequences' own caches (DenseBatch::host: the
// host executor) or in a mirror of the host KvPool (same kv_dim, block_tokens, n_blocks; blocks
// addressed by the same ids), filled only through this interface (a device executor). The pool
// holds every model layer, or, for a model with sliding-window layers, its full layers only
// (KvLayerLayout::n_full: the scheduler's pool, whose sequences' WindowedKvCaches keep the
// windowed layers in host rings). With window_rings() the executor keeps the windowed layers in
// rings of its own, addressed by DenseBatch::ring_slots / ring_tables, and mirrors the pool's
// layers; without, its mirror holds every model layer, the windowed ones at the full layers'
// block ids (every position kept, only the window read). Per pass the runner calls, in this
// order:
//   begin(batch)
//   per layer l: attention(l), then dense_ffn(l) for a dense layer, or for a MoE layer
//     moe_input(l, h, router_logits) -> [host: route + routed experts] -> moe_output(l, moe_sum)
//   logits(rows, out)
// with copy_block(src, dst) possibly called between passes (from KvPool's copy hook when
// PagedKvCache::prepare_write copies a shared block: copy-on-write) and before begin(), for an
// executor with a mirrored pool.
//
// Arithmetic: the host executor's (cpu_dense_executor.h) is the reference every device executor
// is tested against. A layer's attention (GQA) is
//   h = rmsnorm(x) * attn_norm; q,k,v = h W^T (+ bias); Q/K norm; RoPE at positions; K/V rows
//   written at each token's position (kv_slots in a mirror); causal attention per sequence
//   through its block table (sinks, window where the model has them); x += attn W_o^T (+ bias)
// or MLA's absorbed form (mla_attention_layer.cpp); dense_ffn: x += swiglu(rmsnorm(x) *
// ffn_norm); moe_input: h = rmsnorm(x) * ffn_norm and the router's float logits h W_r^T (+ bias);
// moe_output: ffn = moe_sum [+ (sigmoid(h w_g) *) shared(h)]; x += ffn; logits:
// (rmsnorm(x[rows]) * output_norm) W_lm^T.
//
// Errors: any call may fail (INTERNAL with the device error, INVALID_ARGUMENT for a batch beyond
// max_batch_tokens() or shaped for another model). After a failed call the pass is over: x and
// the K/V rows the pass writes (each sequence's rows from start_pos on) are undefined, exactly as
// an expert-worker error leaves them in ModelRunner::forward; the next begin() starts afresh.
// copy_block errors leave the destination block undefined.
//
// Ownership and threads: the runner owns the executor (its CpuDenseExecutor, or the one given to
// ModelRunner::set_dense_executor). The host KvPool a device executor mirrors must outlive every
// call (an executor's destructor does not touch it, so a Scheduler may destroy its pool before
// its runner). All calls come from one thread at a time
// (the runner's forward thread: the scheduler's loop).
// Why `spec` cannot run on a device dense executor ("" when it can): its heads are wider than the
// device attention takes (kernels::cuda::kMaxAttentionKeyDim / kMaxAttentionValueDim) or no layer
// keeps every position (so no block table addresses the mirror). ModelRunner::set_dense_executor
// refuses such models with this reason; tandemd keeps their dense parts on the CPU (the host
// executor runs every model) when runtime.dense_device is auto.
std::string dense_executor_unsupported(const model::ModelSpec& spec);

class DenseExecutor {
 public:
  virtual ~DenseExecutor() = default;

  // The host pool whose blocks this executor mirrors (forward then accepts only PagedKvCaches of
  // it), or null for an executor that uses the sequences' own caches (DenseBatch::host).
  virtual KvPool* mirrored_pool() = 0;
  // The most tokens one pass may hold (scratch is sized for it).
  virtual size_t max_batch_tokens() const = 0;
  // Its sliding-window layers' rings (a mirrored pool of the full layers only); none by default.
  virtual DeviceWindowRings window_rings() const { return {}; }

  // Starts a pass: copies x and the batch's tables to the device.
  virtual Status begin(const DenseBatch& batch) = 0;
  // The attention half of `layer`, residual included.
  virtual Status attention(size_t layer) = 0;
  // The FFN half of a dense (non-MoE) layer, residual included.
  virtual Status dense_ffn(size_t layer) = 0;
  // The FFN input of a MoE layer: h [n_tokens x hidden] (normed x) and router_logits [n_tokens x
  // n_experts] (router bias included), both written to the host spans (exact sizes) before
  // returning. The caller keeps h unchanged until moe_output(layer) returns: an executor may read
  // it there (the host executor's shared expert does).
  virtual Status moe_input(size_t layer, std::span<float> h, std::span<float> router_logits) = 0;
  // Finishes a MoE layer with the routed experts' sum moe_sum [n_tokens x hidden] (host): adds
  // the shared expert (gated when the model has a gate) and the residual. moe_sum is read before
  // the call returns.
  virtual Status moe_output(size_t layer, std::span<const float> moe_sum) = 0;
  // out [rows.size() x n_vocab] = the logits of batch tokens `rows` (indices < n_tokens, any
  // order), written before returning. Ends the pass.
  virtual Status logits(std::span<const int32_t> rows, std::span<float> out) = 0;
  // Copies block src to block dst in every layer, K and V, of the mirror (src != dst, both <
  // n_blocks). Ordered before the next pass's work.
  virtual Status copy_block(BlockId src, BlockId dst) = 0;
};

}  // namespace tandem::runtime
