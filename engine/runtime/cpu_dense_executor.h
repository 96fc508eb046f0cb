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

// How MLA attention computes a sequence's new tokens (CpuDenseExecutor):
//  kAbsorbed: every query mapped into the latent space (q_nope through k_b) and scored against the
//             cached latent rows, the latent output mapped back through v_b: the cheapest for
//             decode, and what llama.cpp computes for every batch.
//  kExpanded: the cached latent rows of the whole context expanded into each head's keys
//             [k_b^T c | k_pe] and values v_b c, then ordinary attention over 192 + 128 values
//             per head and key instead of 576 + 512 (what vLLM and SGLang do for prefill): per
//             head, the context's expansion costs (nope + v_head) * kv_lora per key, once per
//             call, and every query-key pair 768 fewer multiply-adds.
//  kAuto:     per sequence of kMlaExpandedMinTokens new tokens or more, whichever of the two
//             needs fewer multiply-adds for its tokens and context (the expanded form for a fresh
//             or long prompt, never for a decode step); shorter ones absorbed.
// The two are the same arithmetic in exact numbers; in floats they differ by rounding (and by the
// activation quantization of the matrices they pass through). On the DeepSeek-V3-shaped bench
// model (16 heads; docs/benchmarks.md) a 2,048-token prompt prefilled 55.3 -> 72.8 tok/s with two
// threads of a first-generation Zen EPYC.
enum class MlaPrefill : uint8_t { kAuto, kAbsorbed, kExpanded };
// kAuto expands no sequence of fewer new tokens than this: from 16 to 64 tokens the two forms
// prefilled equally fast (the bench model above, within the noise), and the absorbed form is
// llama.cpp's arithmetic, which the GGUF references were made with.
inline constexpr size_t kMlaExpandedMinTokens = 128;
// Nor one whose expansion would hold more than this at once (mla_expanded_bytes): about 160,000
// positions of DeepSeek-V3's shape with 2 threads, 10,000 with 64; longer contexts stay absorbed.
inline constexpr size_t kMlaExpandedMaxBytes = size_t{1} << 30;

// Bytes the expanded form holds at once for a context of n_ctx positions of `spec` (an MLA model)
// with `threads` threads: the context's latent rows as floats and quantized, their rope parts, and
// one head's keys and values per busy thread (at most one per head). Pure.
size_t mla_expanded_bytes(const model::ModelSpec& spec, size_t threads, size_t n_ctx);
// Whether MlaPrefill::kAuto computes n_new new tokens after start_pos cached positions of `spec`
// in the expanded form: at least kMlaExpandedMinTokens of them, fewer multiply-adds than the
// absorbed form, and mla_expanded_bytes of the whole context within kMlaExpandedMaxBytes. Pure.
bool mla_auto_expands(const model::ModelSpec& spec, size_t threads, size_t start_pos, size_t n_new);

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
                   kernels::MatmulActivations mode, MlaPrefill mla_prefill = MlaPrefill::kAuto);

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
  // Whether MLA computes sequence s of the pass in the expanded form (MlaPrefill); begin() keeps
  // the answers in mla_expanded_.
  bool mla_expanded(size_t s) const;
  // fn(expanded, s0, s1, first_token, end_token) for each run [s0, s1) of consecutive sequences
  // of the same form, covering batch tokens [first_token, end_token).
  template <typename Fn>
  void for_each_mla_run(const Fn& fn) const;
  // The expanded form for sequence s (mla_expanded_attention.cpp): reads the pass's projected
  // queries (mla_q_: q_nope) and absorbed queries (q_: the rotated q_pe) and the layer's latent
  // rows in the sequence's cache; writes the sequence's rows of mla_heads_ [n x heads x v_head].
  void mla_expanded_attention(size_t layer, size_t s);
  // Each head's k_b transposed to F32 for the layer (made on first use).
  const std::vector<float>& mla_k_b_t(size_t layer);
  // Causal attention of every sequence's new tokens (q: batch tokens x n_heads x head_dim) into
  // out (batch tokens x n_heads x value dim), threads over (sequence, head) pairs.
  // Sequences with skip[s] set are left out (skip empty: none).
  void attend(size_t layer, const kernels::AttentionConfig& cfg, const std::vector<float>& q,
              std::vector<float>& out, const std::vector<bool>& skip = {});
  // Writes rows [n_tokens x row] of `layer` (values empty for a keys-only cache) into every
  // sequence's cache at its positions.
  void write_kv(size_t layer, const std::vector<float>& keys, const std::vector<float>* values,
                size_t row);

  model::ModelSpec spec_;
  const PreparedWeights& weights_;
  ThreadPool* pool_;
  ThreadPool inline_pool_{1};  // pool_ when the caller gives none
  kernels::MatmulActivations mode_;
  MlaPrefill mla_prefill_;
  experts::MatmulScratch scratch_;
  // MLA's expanded form: per layer, each head's k_b transposed to F32 [nope x kv_lora] (made on
  // the layer's first expanded call: kv_lora * nope * heads floats per layer, 32 MiB for
  // DeepSeek-V3's), and which sequences of the pass take it (set by begin()).
  std::vector<std::vector<float>> mla_k_b_t_;
  std::vector<bool> mla_expanded_;

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
