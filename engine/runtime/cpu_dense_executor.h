// CpuDenseExecutor: the dense parts of the forward pass (attention, norms, router, shared experts,
// dense FFNs, the head) on the host with kernels/cpu: the reference recipe every device executor
// is tested against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "engine/experts/experts.h"
#include "engine/model/model_spec.h"
#include "engine/runtime/dense_executor.h"
#include "engine/runtime/prepared_weights.h"
#include "kernels/cpu/attention.h"

namespace tandem::runtime {

// Runs every model Tandem reads (GQA with or without sinks, biases, Q/K norms and sliding windows;
// MLA), writing and reading K/V through the sequences' own caches (DenseBatch::host: dense,
// paged or windowed). Every kernel computes each output element on one thread with the same
// arithmetic whatever the thread count or batch composition, so results are bit-identical across
// thread counts, and a sequence's results do not depend on the other sequences of its batch.
//
// The spec is copied; weights and pool (threads; null runs on the calling thread) are the
// caller's and must outlive the executor. Calls come from one thread at a time; none fails.
class CpuDenseExecutor final : public DenseExecutor {
 public:
  CpuDenseExecutor(const model::ModelSpec& spec, const PreparedWeights& weights, ThreadPool* pool,
                   kernels::MatmulActivations mode);

  KvPool* mirrored_pool() override { return nullptr; }
  size_t max_batch_tokens() const override { return SIZE_MAX; }
  Status begin(const DenseBatch& batch) override;
  Status attention(size_t layer) override;
  Status dense_ffn(size_t layer) override;
  Status moe_input(size_t layer, std::span<float> h, std::span<float> router_logits) override;
  Status moe_output(size_t layer, std::span<const float> moe_sum) override;
  Status logits(std::span<const int32_t> rows, std::span<float> out) override;
  // No mirror: copy-on-write copies happen in the host pool itself.
  Status copy_block(BlockId, BlockId) override { return Status(); }

 private:
  // GQA (attention_layer.cpp) and MLA (mla_attention_layer.cpp) attention halves.
  void gqa_attention(size_t layer);
  void mla_attention(size_t layer);
  // Causal attention of every sequence's new tokens (q: batch tokens x n_heads x head_dim) into
  // out (batch tokens x n_heads x value dim), threads over (sequence, head) pairs.
  void attend(size_t layer, const kernels::AttentionConfig& cfg, const std::vector<float>& q,
              std::vector<float>& out);
  // Writes rows [n_tokens x row] of `layer` (values empty for a keys-only cache) into every
  // sequence's cache at its positions.
  void write_kv(size_t layer, const std::vector<float>& keys, const std::vector<float>* values,
                size_t row);

  model::ModelSpec spec_;
  const PreparedWeights& weights_;
  ThreadPool* pool_;
  ThreadPool inline_pool_{1};  // pool_ when the caller gives none
  kernels::MatmulActivations mode_;
  experts::MatmulScratch scratch_;

  // The pass: its sequences (host caches), token positions and buffers, reused across passes.
  std::span<const SequenceInput> seqs_;
  std::vector<size_t> token_offset_;  // per sequence
  std::vector<int32_t> positions_;
  size_t n_ = 0;
  std::span<const float> moe_h_;  // moe_input's h, read by moe_output
  std::vector<float> x_, h_, q_, k_, v_, attn_, tmp_, shared_out_, gate_;
  std::vector<float> mla_q_, mla_qa_, mla_in_, mla_heads_;  // MLA only
};

}  // namespace tandem::runtime
