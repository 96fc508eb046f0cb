// CpuDenseExecutor::mla_attention: DeepSeek's multi-head latent attention in the absorbed form.
// The cache holds one row per token, [rmsnorm(c_kv) | rope(k_pe)] (kv_lora_rank + qk_rope
// floats), shared by every head; values are its first kv_lora_rank floats. Each head's query is
// [k_b q_nope | rope(q_pe)], so a score is q_nope . (W_k c_kv) + q_pe . k_pe without ever
// expanding per-head keys, and the head's output is v_b applied to the softmax-weighted latent.
#include <algorithm>
#include <cmath>

#include "engine/runtime/cpu_dense_executor.h"
#include "engine/runtime/model_runner.h"
#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/vector_ops.h"

namespace tandem::runtime {

using R = model::WeightRole;
namespace {

// dst[t * dst_stride + dst_off .. + width) = src[t * src_stride + src_off .. + width), t < n.
void copy_columns(const float* src, size_t src_stride, size_t src_off, float* dst,
                  size_t dst_stride, size_t dst_off, size_t width, size_t n) {
  for (size_t t = 0; t < n; ++t) {
    std::copy_n(src + t * src_stride + src_off, width, dst + t * dst_stride + dst_off);
  }
}

// For every head j (threads split the heads; one parallel region for all of them):
//   out[t, j * out_stride_head + (0 .. w[j].rows)] = w[j] . in[t, j * in_head + (0 .. w[j].cols)]
// over rows t < n of `in` (row stride in_stride) and `out` (row stride out_stride). Activations are
// quantized per head as pooled_matmul would (so the result equals n_heads pooled_matmul calls bit
// for bit), in thread-local scratch.
void per_head_matmul(ThreadPool* pool, std::span<const kernels::WeightMatrix> w, const float* in,
                     size_t in_stride, size_t in_head, float* out, size_t out_stride,
                     size_t out_head, size_t n, kernels::MatmulActivations mode) {
  auto heads = [&](size_t j0, size_t j1) {
    thread_local std::vector<float> x;
    thread_local std::vector<float> y;
    thread_local kernels::QuantizedActivations xq;
    for (size_t j = j0; j < j1; ++j) {
      const kernels::WeightMatrix& m = w[j];
      x.resize(n * m.cols);
      y.resize(n * m.rows);
      copy_columns(in, in_stride, j * in_head, x.data(), m.cols, 0, m.cols, n);
      const kernels::ActivationFormat format = kernels::matmul_activation_format(m.type, mode);
      kernels::ActivationRows xv{format, n, m.cols, x.data()};
      if (format != kernels::ActivationFormat::kF32) {
        kernels::quantize_activations(format, x, n, m.cols, xq);
        xv = kernels::view_of(xq);
      }
      kernels::matmul_rows(m, xv, y.data(), m.rows, 0, m.rows);
      copy_columns(y.data(), m.rows, 0, out, out_stride, j * out_head, m.rows, n);
    }
  };
  if (pool->n_threads() == 1 || w.size() == 1) {
    heads(0, w.size());
  } else {
    pool->parallel_for(0, w.size(), 1, heads);
  }
}

}  // namespace

template <typename Fn>
void CpuDenseExecutor::for_each_mla_run(const Fn& fn) const {
  for (size_t s0 = 0; s0 < seqs_.size();) {
    size_t s1 = s0 + 1;
    while (s1 < seqs_.size() && mla_expanded_[s1] == mla_expanded_[s0]) ++s1;
    fn(static_cast<bool>(mla_expanded_[s0]), s0, s1, token_offset_[s0],
       token_offset_[s1 - 1] + seqs_[s1 - 1].tokens.size());
    s0 = s1;
  }
}

void CpuDenseExecutor::mla_attention(size_t layer) {
  const PreparedLayer& L = weights_.layers[layer];
  const model::MlaSpec& m = spec_.mla;
  const size_t n = n_;
  const size_t hidden = spec_.hidden_size;
  const size_t heads = spec_.n_heads;
  const size_t lora = m.kv_lora_rank;
  const size_t rope_dim = m.qk_rope_dim;
  const size_t nope = m.qk_nope_dim;
  const size_t q_head = m.q_head_dim();
  const size_t row = m.cache_row();  // = spec_.head_dim
  const size_t v_head = m.v_head_dim;
  const float eps = static_cast<float>(spec_.rms_norm_eps);
  ThreadPool* pool = pool_;

  kernels::rms_norm(x_, L.vector(R::kAttnNorm), eps, n, hidden, h_);
  std::span<const float> h(h_.data(), n * hidden);

  // Queries [n x heads x (nope + rope)], through the low-rank q when the model has one,
  mla_q_.resize(n * heads * q_head);
  std::span<float> q_raw(mla_q_.data(), n * heads * q_head);
  // and the cache rows [c_kv | k_pe] from one projection (c_kv normed, k_pe rotated below); the
  // projections of h in one parallel region.
  std::span<float> kv(k_.data(), n * row);
  if (m.q_lora_rank > 0) {
    const size_t r = m.q_lora_rank;
    mla_qa_.resize(n * r);
    std::span<float> qa(mla_qa_.data(), n * r);
    const experts::MatmulOutput of_h[] = {{&L.matrix(R::kAttnQA), qa},
                                          {&L.matrix(R::kAttnKvA), kv}};
    experts::pooled_matmuls(pool, of_h, h, n, mode_, scratch_);
    kernels::rms_norm(qa, L.vector(R::kAttnQANorm), eps, n, r, qa);
    experts::pooled_matmul(pool, L.matrix(R::kAttnQB), qa, n, q_raw, mode_, scratch_);
  } else {
    const experts::MatmulOutput of_h[] = {{&L.matrix(R::kAttnQ), q_raw},
                                          {&L.matrix(R::kAttnKvA), kv}};
    experts::pooled_matmuls(pool, of_h, h, n, mode_, scratch_);
  }
  for (size_t t = 0; t < n; ++t) {
    std::span<float> c(k_.data() + t * row, lora);
    kernels::rms_norm(c, L.vector(R::kAttnKvANorm), eps, 1, lora, c);
  }
  kernels::RopeConfig rope = rope_config(spec_, layer);
  rope.head_dim = rope_dim;
  rope.rot_dims = rope_dim;
  mla_in_.resize(n * heads * rope_dim);
  copy_columns(k_.data(), row, lora, mla_in_.data(), rope_dim, 0, rope_dim, n);
  kernels::rope(std::span<float>(mla_in_.data(), n * rope_dim), n, 1, positions_, rope);
  copy_columns(mla_in_.data(), rope_dim, 0, k_.data(), row, lora, rope_dim, n);

  // Absorbed queries [n x heads x row]: q_pe rotated, q_nope mapped into the latent by k_b.
  std::vector<float>& q_abs = q_;
  q_abs.resize(n * heads * row);
  for (size_t j = 0; j < heads; ++j) {
    copy_columns(mla_q_.data(), heads * q_head, j * q_head + nope, mla_in_.data(), heads * rope_dim,
                 j * rope_dim, rope_dim, n);
  }
  kernels::rope(std::span<float>(mla_in_.data(), n * heads * rope_dim), n, heads, positions_, rope);
  for (size_t j = 0; j < heads; ++j) {
    copy_columns(mla_in_.data(), heads * rope_dim, j * rope_dim, q_abs.data(), heads * row,
                 j * row + lora, rope_dim, n);
  }
  // The absorbed sequences' q_nope through k_b, one parallel region per run of them (the
  // expanded ones, chosen in begin(), read q_nope as projected).
  for_each_mla_run([&](bool expanded, size_t, size_t, size_t first, size_t last) {
    if (expanded) return;
    per_head_matmul(pool, L.k_b, mla_q_.data() + first * heads * q_head, heads * q_head, q_head,
                    q_abs.data() + first * heads * row, heads * row, row, last - first, mode_);
  });

  write_kv(layer, k_, nullptr, row);

  kernels::AttentionConfig cfg;
  cfg.n_heads = heads;
  cfg.n_kv_heads = 1;
  cfg.head_dim = row;
  cfg.value_dim = lora;
  cfg.scale = static_cast<float>(spec_.attn_scale);
  attn_.resize(n * heads * lora);
  attend(layer, cfg, q_abs, attn_, mla_expanded_);

  // Each head's latent output back to its value space (the absorbed sequences' runs), the
  // expanded sequences' head outputs directly; then the output projection.
  mla_heads_.resize(n * heads * v_head);
  for_each_mla_run([&](bool expanded, size_t s0, size_t s1, size_t first, size_t last) {
    if (expanded) {
      for (size_t s = s0; s < s1; ++s) mla_expanded_attention(layer, s);
    } else {
      per_head_matmul(pool, L.v_b, attn_.data() + first * heads * lora, heads * lora, lora,
                      mla_heads_.data() + first * heads * v_head, heads * v_head, v_head,
                      last - first, mode_);
    }
  });
  std::span<float> o(tmp_.data(), n * hidden);
  experts::pooled_matmul(pool, L.matrix(R::kAttnO),
                         std::span<const float>(mla_heads_.data(), n * heads * v_head), n, o, mode_,
                         scratch_);
  std::span<float> x(x_.data(), n * hidden);
  kernels::add(x, o, x);
}

}  // namespace tandem::runtime
