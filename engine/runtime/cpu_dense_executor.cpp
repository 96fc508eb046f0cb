// CpuDenseExecutor: the pass set-up, the FFN halves (dense FFN, MoE input and output with the
// shared expert) and the head; the attention halves are in attention_layer.cpp and
// mla_attention_layer.cpp.
#include "engine/runtime/cpu_dense_executor.h"

#include <algorithm>

#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/vector_ops.h"

namespace tandem::runtime {

using R = model::WeightRole;

CpuDenseExecutor::CpuDenseExecutor(const model::ModelSpec& spec, const PreparedWeights& weights,
                                   ThreadPool* pool, kernels::MatmulActivations mode,
                                   MlaPrefill mla_prefill)
    : spec_(spec),
      weights_(weights),
      pool_(pool != nullptr ? pool : &inline_pool_),
      mode_(mode),
      mla_prefill_(mla_prefill) {}

Status CpuDenseExecutor::begin(const DenseBatch& batch) {
  TANDEM_CHECK_MSG(batch.host.size() == batch.seqs.size(),
                   "CpuDenseExecutor: every sequence needs its host cache");
  seqs_ = batch.host;
  n_ = batch.n_tokens;
  token_offset_.resize(batch.seqs.size());
  for (size_t s = 0; s < batch.seqs.size(); ++s) token_offset_[s] = batch.seqs[s].first_token;
  positions_.assign(batch.positions.begin(), batch.positions.end());
  const size_t hidden = spec_.hidden_size;
  x_.assign(batch.x.begin(), batch.x.end());
  h_.resize(n_ * hidden);
  tmp_.resize(n_ * hidden);
  q_.resize(n_ * spec_.q_dim());
  attn_.resize(n_ * spec_.q_dim());
  k_.resize(n_ * spec_.kv_dim());
  v_.resize(n_ * spec_.kv_dim());
  mla_expanded_.assign(seqs_.size(), false);
  if (spec_.attention == model::AttentionKind::kMla) {
    for (size_t s = 0; s < seqs_.size(); ++s) mla_expanded_[s] = mla_expanded(s);
  }
  return Status();
}

Status CpuDenseExecutor::attention(size_t layer) {
  if (spec_.attention == model::AttentionKind::kMla) {
    mla_attention(layer);
  } else {
    gqa_attention(layer);
  }
  return Status();
}

void CpuDenseExecutor::write_kv(size_t layer, const std::vector<float>& keys,
                                const std::vector<float>* values, size_t row) {
  for (size_t s = 0; s < seqs_.size(); ++s) {
    const SequenceInput& seq = seqs_[s];
    const size_t count = seq.tokens.size() * row;
    const size_t first = token_offset_[s] * row;
    seq.cache->write(layer, seq.start_pos, std::span<const float>(keys.data() + first, count),
                     values != nullptr ? std::span<const float>(values->data() + first, count)
                                       : std::span<const float>());
  }
}

Status CpuDenseExecutor::dense_ffn(size_t layer) {
  const PreparedLayer& L = weights_.layers[layer];
  const size_t hidden = spec_.hidden_size;
  kernels::rms_norm(x_, L.vector(R::kFfnNorm), static_cast<float>(spec_.rms_norm_eps), n_, hidden,
                    h_);
  std::span<float> ffn(tmp_.data(), n_ * hidden);
  experts::swiglu_mlp(pool_, L.matrix(R::kDenseGate), L.matrix(R::kDenseUp),
                      L.matrix(R::kDenseDown), std::span<const float>(h_.data(), n_ * hidden), n_,
                      ffn, mode_, scratch_);
  std::span<float> x(x_.data(), n_ * hidden);
  kernels::add(x, ffn, x);
  return Status();
}

Status CpuDenseExecutor::moe_input(size_t layer, std::span<float> h,
                                   std::span<float> router_logits) {
  const PreparedLayer& L = weights_.layers[layer];
  const size_t hidden = spec_.hidden_size;
  const size_t n_experts = spec_.n_experts;
  kernels::rms_norm(x_, L.vector(R::kFfnNorm), static_cast<float>(spec_.rms_norm_eps), n_, hidden,
                    h);
  experts::pooled_matmul(pool_, L.matrix(R::kRouter), h, n_, router_logits,
                         kernels::MatmulActivations::kFloat, scratch_);
  if (!L.vector(R::kRouterBias).empty()) {
    for (size_t t = 0; t < n_; ++t) {
      std::span<float> row(router_logits.data() + t * n_experts, n_experts);
      kernels::add(row, L.vector(R::kRouterBias), row);
    }
  }
  moe_h_ = h;
  return Status();
}

Status CpuDenseExecutor::moe_output(size_t layer, std::span<const float> moe_sum) {
  const PreparedLayer& L = weights_.layers[layer];
  const size_t hidden = spec_.hidden_size;
  std::span<float> x(x_.data(), n_ * hidden);
  if (!L.has(R::kSharedGate)) {
    kernels::add(x, moe_sum, x);
    return Status();
  }
  // ffn = moe_sum + shared, then the residual: llama.cpp's order.
  shared_out_.resize(n_ * hidden);
  experts::swiglu_mlp(pool_, L.matrix(R::kSharedGate), L.matrix(R::kSharedUp),
                      L.matrix(R::kSharedDown), moe_h_, n_, shared_out_, mode_, scratch_);
  if (L.has(R::kSharedExpertGate)) {
    gate_.resize(n_);
    experts::pooled_matmul(pool_, L.matrix(R::kSharedExpertGate), moe_h_, n_, gate_,
                           kernels::MatmulActivations::kFloat, scratch_);
    kernels::sigmoid(gate_, gate_);
    for (size_t t = 0; t < n_; ++t) {
      kernels::scale(std::span<float>(shared_out_.data() + t * hidden, hidden), gate_[t]);
    }
  }
  std::span<float> ffn(tmp_.data(), n_ * hidden);
  kernels::add(moe_sum, shared_out_, ffn);
  kernels::add(x, ffn, x);
  return Status();
}

Status CpuDenseExecutor::logits(std::span<const int32_t> rows, std::span<float> out) {
  const size_t hidden = spec_.hidden_size;
  if (rows.empty()) return Status();
  for (size_t i = 0; i < rows.size(); ++i) {
    std::copy_n(x_.data() + static_cast<size_t>(rows[i]) * hidden, hidden, h_.data() + i * hidden);
  }
  std::span<float> hr(h_.data(), rows.size() * hidden);
  kernels::rms_norm(hr, weights_.output_norm, static_cast<float>(spec_.rms_norm_eps), rows.size(),
                    hidden, hr);
  experts::pooled_matmul(pool_, weights_.lm_head, hr, rows.size(), out, mode_, scratch_);
  return Status();
}

}  // namespace tandem::runtime
