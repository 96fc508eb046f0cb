// CpuDenseExecutor's GQA attention half: norms, Q/K/V projections, Q/K norm, RoPE, KV append,
// per-sequence causal attention through each cache's block table, output projection and residual
// add; and the attention step it shares with MLA (attend).
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/runtime/cpu_dense_executor.h"
#include "engine/runtime/model_runner.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/vector_ops.h"

namespace tandem::runtime {

using R = model::WeightRole;
namespace {

void add_bias(std::vector<float>& y, size_t n_tokens, const std::vector<float>& bias) {
  if (bias.empty()) return;
  const size_t dim = bias.size();
  for (size_t t = 0; t < n_tokens; ++t) {
    std::span<float> row(y.data() + t * dim, dim);
    kernels::add(row, bias, row);
  }
}

}  // namespace

void CpuDenseExecutor::gqa_attention(size_t layer) {
  const PreparedLayer& L = weights_.layers[layer];
  const size_t n = n_;
  const size_t hidden = spec_.hidden_size;
  const size_t q_dim = spec_.q_dim();
  const size_t kv_dim = spec_.kv_dim();
  const size_t head_dim = spec_.head_dim;
  const float eps = static_cast<float>(spec_.rms_norm_eps);
  ThreadPool* pool = pool_;

  kernels::rms_norm(x_, L.vector(R::kAttnNorm), eps, n, hidden, h_);
  std::span<const float> h(h_.data(), n * hidden);
  const experts::MatmulOutput qkv[] = {
      {&L.matrix(R::kAttnQ), std::span<float>(q_.data(), n * q_dim)},
      {&L.matrix(R::kAttnK), std::span<float>(k_.data(), n * kv_dim)},
      {&L.matrix(R::kAttnV), std::span<float>(v_.data(), n * kv_dim)}};
  experts::pooled_matmuls(pool, qkv, h, n, mode_, scratch_);
  add_bias(q_, n, L.vector(R::kAttnQBias));
  add_bias(k_, n, L.vector(R::kAttnKBias));
  add_bias(v_, n, L.vector(R::kAttnVBias));

  std::span<float> q(q_.data(), n * q_dim);
  std::span<float> k(k_.data(), n * kv_dim);
  if (spec_.qk_norm == model::QkNorm::kPerHead) {
    kernels::rms_norm_heads(q, L.vector(R::kAttnQNorm), eps, n, spec_.n_heads, head_dim, q);
    kernels::rms_norm_heads(k, L.vector(R::kAttnKNorm), eps, n, spec_.n_kv_heads, head_dim, k);
  } else if (spec_.qk_norm == model::QkNorm::kWholeProjection) {
    kernels::rms_norm(q, L.vector(R::kAttnQNorm), eps, n, q_dim, q);
    kernels::rms_norm(k, L.vector(R::kAttnKNorm), eps, n, kv_dim, k);
  }

  const kernels::RopeConfig rope = rope_config(spec_, layer);
  kernels::rope(q, n, spec_.n_heads, positions_, rope);
  kernels::rope(k, n, spec_.n_kv_heads, positions_, rope);

  write_kv(layer, k_, &v_, kv_dim);

  kernels::AttentionConfig cfg;
  cfg.n_heads = spec_.n_heads;
  cfg.n_kv_heads = spec_.n_kv_heads;
  cfg.head_dim = head_dim;
  cfg.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  cfg.window = static_cast<size_t>(spec_.attention_window(layer));
  cfg.sinks = L.vector(R::kAttnSinks);
  attend(layer, cfg, q_, attn_);

  std::span<float> o(tmp_.data(), n * hidden);
  experts::pooled_matmul(pool, L.matrix(R::kAttnO), std::span<const float>(attn_.data(), n * q_dim),
                         n, o, mode_, scratch_);
  add_bias(tmp_, n, L.vector(R::kAttnOBias));
  std::span<float> x(x_.data(), n * hidden);
  kernels::add(x, o, x);
}

void CpuDenseExecutor::attend(size_t layer, const kernels::AttentionConfig& cfg,
                              const std::vector<float>& q, std::vector<float>& out,
                              const std::vector<bool>& skip) {
  const std::span<const SequenceInput> batch = seqs_;
  const size_t q_dim = cfg.n_heads * cfg.head_dim;
  const size_t out_dim = cfg.n_heads * (cfg.value_dim != 0 ? cfg.value_dim : cfg.head_dim);
  ThreadPool* pool = pool_;
  std::vector<kernels::KvBlocks> kvs(batch.size());
  for (size_t s = 0; s < batch.size(); ++s) {
    kvs[s] = batch[s].cache->blocks(layer, batch[s].start_pos + batch[s].tokens.size());
  }
  // Work items are (sequence, range of heads): heads of one range that share a kv head read each
  // cached row once. About two items per thread, so that uneven sequences still balance; one per
  // thread for a lone sequence, whose items are all alike: each item reads (f16: converts) every
  // cached row of its kv heads, which MLA's one latent head shares with all heads. Decode after a
  // 2,048-token prompt, 2 threads of a first-generation Zen EPYC: DeepSeek-shaped 22.5-23.5 ->
  // 25.6-26.1 tok/s, Qwen3-MoE-shaped (32 heads over 4 kv heads) 33.9-34.1 -> 36.0-36.5.
  const size_t n_heads = cfg.n_heads;
  const size_t threads = pool->n_threads();
  const size_t items_per_thread = batch.size() == 1 ? 1 : 2;
  const size_t chunk = std::clamp<size_t>(
      (n_heads * batch.size() + items_per_thread * threads - 1) / (items_per_thread * threads), 1,
      n_heads);
  const size_t per_seq = (n_heads + chunk - 1) / chunk;
  const size_t n_items = batch.size() * per_seq;
  auto run = [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; ++i) {
      const size_t s = i / per_seq;
      const size_t head = (i % per_seq) * chunk;
      const size_t head_end = std::min(n_heads, head + chunk);
      if (!skip.empty() && skip[s]) continue;
      const SequenceInput& seq = batch[s];
      const size_t ns = seq.tokens.size();
      std::span<const float> qs(q.data() + token_offset_[s] * q_dim, ns * q_dim);
      std::span<float> os(out.data() + token_offset_[s] * out_dim, ns * out_dim);
      kernels::attention_heads(qs, ns, seq.start_pos, kvs[s], cfg, os, head, head_end);
    }
  };
  // Attention reads every visible cached position once per head: small contexts run on one
  // thread.
  size_t work = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    if (!skip.empty() && skip[s]) continue;
    const SequenceInput& seq = batch[s];
    const size_t context = seq.start_pos + seq.tokens.size();
    work += seq.tokens.size() * (cfg.window != 0 ? std::min(context, cfg.window) : context) * q_dim;
  }
  if (pool->n_threads() == 1 || work < (size_t{1} << 16)) {
    run(0, n_items);
  } else {
    pool->parallel_for(0, n_items, 1, run);
  }
}

}  // namespace tandem::runtime
