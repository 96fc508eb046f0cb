// Causal grouped-query attention of one sequence's new tokens against its float KV cache, stored
// contiguously or in fixed-size blocks addressed through a block table (paged).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tandem::kernels {

struct AttentionConfig {
  size_t n_heads = 0;     // query heads
  size_t n_kv_heads = 0;  // key/value heads; n_heads must be a multiple (GQA; equal = MHA)
  size_t head_dim = 0;
  float scale = 0.0f;  // score scale; 1 / sqrt(head_dim) for Qwen2/3-MoE, Mixtral, OLMoE
};

// One layer's K and V rows held in blocks of block_rows positions each (kv_row = n_kv_heads *
// head_dim floats per row, row p holding position p's key/value, already RoPE'd). Position p lives
// in block table[p / block_rows] at row p % block_rows; block b's rows start at
// keys + b * block_rows * kv_row (values likewise). Every id in the table is < n_blocks. A
// contiguous cache is one block: table {0}, block_rows = its row count. Non-owning view; the
// storage belongs to the KV cache.
struct KvBlocks {
  const float* keys = nullptr;
  const float* values = nullptr;
  std::span<const int32_t> table;
  size_t block_rows = 0;
  size_t n_blocks = 0;
};

// The query tokens sit at positions start_pos .. start_pos + n_q - 1 of the sequence; query token
// i attends to cache positions 0 .. start_pos + i (causal). Query head h reads kv head
// h / (n_heads / n_kv_heads).
//   q:       [n_q x n_heads x head_dim]
//   kv:      the cache; positions up to start_pos + n_q - 1 must be written and covered by the
//            table.
//   out:     [n_q x n_heads x head_dim]
// For each (token, head): scores s_p = scale * dot(q, k_p) in float, softmax as kernels::softmax
// (max-subtracted, float exp, double sum), out = sum_p w_p v_p accumulated in float, positions in
// ascending order: the block size does not change a single bit of the result.
// Shape mismatches and out-of-range block ids are caller bugs (TANDEM_CHECK). Scratch is
// thread-local (start_pos + n_q floats). Any thread; callers split work over heads, and calls for
// disjoint head ranges write disjoint parts of out.
void attention_heads(std::span<const float> q, size_t n_q, size_t start_pos, const KvBlocks& kv,
                     const AttentionConfig& config, std::span<float> out, size_t head_begin,
                     size_t head_end);

// Contiguous caches: k_cache, v_cache are [n_ctx x n_kv_heads x head_dim], n_ctx >= start_pos +
// n_q; the same computation as above with one block.
void attention(std::span<const float> q, size_t n_q, size_t start_pos,
               std::span<const float> k_cache, std::span<const float> v_cache,
               const AttentionConfig& config, std::span<float> out);

// The contiguous form for query heads [head_begin, head_end) only.
void attention_heads(std::span<const float> q, size_t n_q, size_t start_pos,
                     std::span<const float> k_cache, std::span<const float> v_cache,
                     const AttentionConfig& config, std::span<float> out, size_t head_begin,
                     size_t head_end);

}  // namespace tandem::kernels
