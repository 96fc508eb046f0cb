// Causal grouped-query attention of one sequence's new tokens against its KV cache (f32 or f16
// rows, kv_type.h), stored contiguously or in fixed-size blocks addressed through a block table
// (paged), with optional sliding window and attention sinks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/cpu/kv_type.h"

namespace tandem::kernels {

struct AttentionConfig {
  size_t n_heads = 0;     // query heads
  size_t n_kv_heads = 0;  // key/value heads; n_heads must be a multiple (GQA; equal = MHA)
  size_t head_dim = 0;
  // Floats of each head's value: 0 = head_dim. Less than head_dim for MLA, whose values are the
  // leading value_dim floats of each key row (KvBlocks::values == keys); out is then
  // [n_q x n_heads x value_dim].
  size_t value_dim = 0;
  float scale = 0.0f;  // score scale; 1 / sqrt(head_dim) for Qwen2/3-MoE, Mixtral, OLMoE
  // Sliding window: 0 = full causal attention; otherwise the query at position t sees only keys
  // at positions s with t - s < window (itself and the window - 1 before it). Positions before the
  // window are never read: a cache may have freed their blocks (their table entries may be -1).
  size_t window = 0;
  // Attention sinks (GPT-OSS): empty, or one raw logit per query head that joins that head's
  // softmax denominator (not multiplied by scale) and carries no value. A view; the caller keeps
  // the floats alive for the call.
  std::span<const float> sinks;
};

// One layer's K and V rows held in blocks of block_rows positions each (kv_row = n_kv_heads *
// head_dim elements of `type` per row, row p holding position p's key/value, already RoPE'd).
// Position p lives in block table[p / block_rows] at row p % block_rows; block b's rows start at
// element b * block_rows * kv_row of keys (values likewise). Every id in the table that a call
// reads is in [0, n_blocks); entries for blocks wholly before a sliding window are never read and
// may be anything (-1 for a freed block). A contiguous cache is one block: table {0}, block_rows =
// its row count. Non-owning view; the storage belongs to the KV cache.
struct KvBlocks {
  const void* keys = nullptr;
  const void* values = nullptr;
  std::span<const int32_t> table;
  size_t block_rows = 0;
  size_t n_blocks = 0;
  KvType type = KvType::kF32;  // the element type of keys and values
};

// The query tokens sit at positions start_pos .. start_pos + n_q - 1 of the sequence; query token
// i, at position t = start_pos + i, attends to cache positions lo(t) .. t with lo(t) = 0 when
// window == 0 or t < window, else t + 1 - window (causal, optionally windowed). Query head h reads
// kv head h / (n_heads / n_kv_heads).
//   q:       [n_q x n_heads x head_dim]
//   kv:      the cache; positions lo(start_pos) .. start_pos + n_q - 1 must be written; the table
//            covers every position up to start_pos + n_q - 1 (table.size() >= ceil((start_pos +
//            n_q) / block_rows)), but only entries of blocks holding positions >= lo(start_pos)
//            are read or checked.
//   out:     [n_q x n_heads x value_dim] (value_dim = head_dim unless the config says less); the
//            value of kv head g at position p is the first value_dim floats of its row (row layout
//            as the keys').
// An f16 cache's rows are read as their exact float values (in runs of a few rows converted to a
// scratch first), so every result below is that of an f32 cache holding those values, bit for bit.
// For each (token, head), over positions p = lo(t) .. t in ascending order:
//   s_p = scale * dot(q, k_p) in float (attention_rows.h's 8-lane fused multiply-add dot);
//   without sinks: w = kernels::softmax(s) (max-subtracted, float exp, double sum, float
//     reciprocal), bit for bit;
//   with sinks, sink = sinks[h] (raw, unscaled): m = max(max_p s_p, sink); e_p = exp(s_p - m) in
//     float; sum = double sum of e_p in ascending p, then + exp(sink - m) (float exp) last;
//     w_p = e_p * float(1 / sum);
//   out = sum_p w_p v_p in float, one fused multiply-add per p in ascending p.
// The block size does not change a single bit of the result, and a window >= t + 1 gives exactly
// full attention. Work per (token, head) is O(min(window, t + 1) * head_dim): nothing before lo(t)
// is computed or read.
// Shape mismatches (sinks neither empty nor n_heads long) and out-of-range block ids in the read
// range are caller bugs (TANDEM_CHECK). The heads of [head_begin, head_end) that share a kv head
// are computed together, reading each cached row once for all of them (the per-head arithmetic
// above is unchanged by it). Scratch is thread-local (heads x min(window, start_pos + n_q)
// floats, or start_pos + n_q without a window), reused across calls: no allocation per (token,
// head). Any thread; callers split work over head ranges, and calls for disjoint head ranges
// write disjoint parts of out.
void attention_heads(std::span<const float> q, size_t n_q, size_t start_pos, const KvBlocks& kv,
                     const AttentionConfig& config, std::span<float> out, size_t head_begin,
                     size_t head_end);

// Contiguous caches: k_cache, v_cache are [n_ctx x n_kv_heads x head_dim], n_ctx >= start_pos +
// n_q; the same computation as above with one block (window and sinks included; rows before the
// window are not read).
void attention(std::span<const float> q, size_t n_q, size_t start_pos,
               std::span<const float> k_cache, std::span<const float> v_cache,
               const AttentionConfig& config, std::span<float> out);

// The contiguous form for query heads [head_begin, head_end) only.
void attention_heads(std::span<const float> q, size_t n_q, size_t start_pos,
                     std::span<const float> k_cache, std::span<const float> v_cache,
                     const AttentionConfig& config, std::span<float> out, size_t head_begin,
                     size_t head_end);

}  // namespace tandem::kernels
