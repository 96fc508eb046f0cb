// Causal grouped-query attention of one sequence's new tokens against its float KV cache.
#pragma once

#include <cstddef>
#include <span>

namespace tandem::kernels {

struct AttentionConfig {
  size_t n_heads = 0;     // query heads
  size_t n_kv_heads = 0;  // key/value heads; n_heads must be a multiple (GQA; equal = MHA)
  size_t head_dim = 0;
  float scale = 0.0f;  // score scale; 1 / sqrt(head_dim) for Qwen2/3-MoE, Mixtral, OLMoE
};

// The query tokens sit at positions start_pos .. start_pos + n_q - 1 of the sequence; query token
// i attends to cache positions 0 .. start_pos + i (causal). Query head h reads kv head
// h / (n_heads / n_kv_heads).
//   q:       [n_q x n_heads x head_dim]
//   k_cache, v_cache: [n_ctx x n_kv_heads x head_dim], row p holding position p's key/value
//            (already RoPE'd); rows up to start_pos + n_q - 1 must be written, n_ctx >= that.
//   out:     [n_q x n_heads x head_dim]
// For each (token, head): scores s_p = scale * dot(q, k_p) in float, softmax as kernels::softmax
// (max-subtracted, float exp, double sum), out = sum_p w_p v_p accumulated in float.
// Shape mismatches are caller bugs (TANDEM_CHECK). Scratch is thread-local (start_pos + n_q
// floats). Any thread; callers split work over heads with attention_heads, whose calls write
// disjoint parts of out.
void attention(std::span<const float> q, size_t n_q, size_t start_pos,
               std::span<const float> k_cache, std::span<const float> v_cache,
               const AttentionConfig& config, std::span<float> out);

// The same for query heads [head_begin, head_end) only.
void attention_heads(std::span<const float> q, size_t n_q, size_t start_pos,
                     std::span<const float> k_cache, std::span<const float> v_cache,
                     const AttentionConfig& config, std::span<float> out, size_t head_begin,
                     size_t head_end);

}  // namespace tandem::kernels
