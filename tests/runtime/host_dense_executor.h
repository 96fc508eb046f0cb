// HostDenseExecutor (test-only): a DenseExecutor on the host with kernels/cpu and its own copy of
// the KV pool, addressed through the batch's block tables and KV slots as a device executor is.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "engine/experts/experts.h"
#include "engine/model/model.h"
#include "engine/runtime/dense_executor.h"
#include "engine/runtime/prepared_weights.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/vector_ops.h"

namespace tandem::runtime::testing {

using R = model::WeightRole;

// The same kernels in the same order as ModelRunner's CPU path (single-threaded: the pooled kernels
// are bit-identical for any thread count), so its logits must equal the CPU path's bit for bit.
// Its KV mirror starts as NaN: a row the runner forgot to have written (or a copy-on-write copy
// that did not reach the mirror) poisons the logits. fail_at injects an error at one call.
class HostDenseExecutor final : public DenseExecutor {
 public:
  HostDenseExecutor(const model::ModelSpec& spec, const PreparedWeights& weights, KvPool& pool,
                    kernels::MatmulActivations mode, size_t max_tokens)
      : spec_(spec), w_(weights), pool_(pool), mode_(mode), max_tokens_(max_tokens) {
    const size_t floats = pool.n_blocks() * pool.block_tokens() * pool.kv_dim();
    keys_.assign(pool.n_layers(), std::vector<float>(floats, std::nanf("")));
    values_ = keys_;
  }

  // The call (e.g. "moe_output 1", "begin", "copy_block") that fails with INTERNAL; empty: none.
  std::string fail_at;
  size_t copies = 0;  // copy_block calls so far
  size_t passes = 0;  // begin calls so far

  KvPool& pool() override { return pool_; }
  size_t max_batch_tokens() const override { return max_tokens_; }

  Status begin(const DenseBatch& b) override {
    TANDEM_RETURN_IF_ERROR(fail("begin"));
    ++passes;
    n_ = b.n_tokens;
    x_.assign(b.x.begin(), b.x.end());
    positions_.assign(b.positions.begin(), b.positions.end());
    slots_.assign(b.kv_slots.begin(), b.kv_slots.end());
    tables_.assign(b.tables.begin(), b.tables.end());
    seqs_.assign(b.seqs.begin(), b.seqs.end());
    h_.resize(n_ * spec_.hidden_size);
    tmp_.resize(n_ * spec_.hidden_size);
    return Status();
  }

  Status attention(size_t layer) override {
    TANDEM_RETURN_IF_ERROR(fail("attention " + std::to_string(layer)));
    const PreparedLayer& L = w_.layers[layer];
    const size_t hidden = spec_.hidden_size, q_dim = spec_.q_dim(), kv_dim = spec_.kv_dim();
    const size_t hd = spec_.head_dim;
    const float eps = static_cast<float>(spec_.rms_norm_eps);
    std::vector<float> q(n_ * q_dim), k(n_ * kv_dim), v(n_ * kv_dim), attn(n_ * q_dim);
    kernels::rms_norm(x_, L.vector(R::kAttnNorm), eps, n_, hidden, h_);
    experts::pooled_matmul(nullptr, L.matrix(R::kAttnQ), h_, n_, q, mode_, scratch_);
    experts::pooled_matmul(nullptr, L.matrix(R::kAttnK), h_, n_, k, mode_, scratch_);
    experts::pooled_matmul(nullptr, L.matrix(R::kAttnV), h_, n_, v, mode_, scratch_);
    add_bias(q, L.vector(R::kAttnQBias));
    add_bias(k, L.vector(R::kAttnKBias));
    add_bias(v, L.vector(R::kAttnVBias));
    if (spec_.qk_norm == model::QkNorm::kPerHead) {
      kernels::rms_norm_heads(q, L.vector(R::kAttnQNorm), eps, n_, spec_.n_heads, hd, q);
      kernels::rms_norm_heads(k, L.vector(R::kAttnKNorm), eps, n_, spec_.n_kv_heads, hd, k);
    } else if (spec_.qk_norm == model::QkNorm::kWholeProjection) {
      kernels::rms_norm(q, L.vector(R::kAttnQNorm), eps, n_, q_dim, q);
      kernels::rms_norm(k, L.vector(R::kAttnKNorm), eps, n_, kv_dim, k);
    }
    kernels::RopeConfig rope;
    rope.layout = spec_.rope.type == model::RopeType::kNeox ? kernels::RopeLayout::kNeox
                                                            : kernels::RopeLayout::kNormal;
    rope.head_dim = hd;
    rope.rot_dims = spec_.rope.n_dims != 0 ? spec_.rope.n_dims : hd;
    rope.freq_base = static_cast<float>(spec_.rope.theta);
    kernels::rope(q, n_, spec_.n_heads, positions_, rope);
    kernels::rope(k, n_, spec_.n_kv_heads, positions_, rope);
    for (size_t t = 0; t < n_; ++t) {  // the KV write, by slot
      const size_t row = static_cast<size_t>(slots_[t]) * kv_dim;
      std::copy_n(k.data() + t * kv_dim, kv_dim, keys_[layer].data() + row);
      std::copy_n(v.data() + t * kv_dim, kv_dim, values_[layer].data() + row);
    }
    kernels::AttentionConfig cfg;
    cfg.n_heads = spec_.n_heads;
    cfg.n_kv_heads = spec_.n_kv_heads;
    cfg.head_dim = hd;
    cfg.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    for (const DenseSequence& s : seqs_) {
      kernels::KvBlocks kv;
      kv.keys = keys_[layer].data();
      kv.values = values_[layer].data();
      kv.table = std::span<const int32_t>(tables_).subspan(s.table_begin, s.table_size);
      kv.block_rows = pool_.block_tokens();
      kv.n_blocks = pool_.n_blocks();
      std::span<const float> qs(q.data() + s.first_token * q_dim, s.n_tokens * q_dim);
      std::span<float> out(attn.data() + s.first_token * q_dim, s.n_tokens * q_dim);
      for (size_t head = 0; head < spec_.n_heads; ++head) {
        kernels::attention_heads(qs, s.n_tokens, s.start_pos, kv, cfg, out, head, head + 1);
      }
    }
    experts::pooled_matmul(nullptr, L.matrix(R::kAttnO), attn, n_, tmp_, mode_, scratch_);
    kernels::add(x_, tmp_, x_);
    return Status();
  }

  Status dense_ffn(size_t layer) override {
    TANDEM_RETURN_IF_ERROR(fail("dense_ffn " + std::to_string(layer)));
    const PreparedLayer& L = w_.layers[layer];
    kernels::rms_norm(x_, L.vector(R::kFfnNorm), static_cast<float>(spec_.rms_norm_eps), n_,
                      spec_.hidden_size, h_);
    experts::swiglu_mlp(nullptr, L.matrix(R::kDenseGate), L.matrix(R::kDenseUp),
                        L.matrix(R::kDenseDown), h_, n_, tmp_, mode_, scratch_);
    kernels::add(x_, tmp_, x_);
    return Status();
  }

  Status moe_input(size_t layer, std::span<float> h, std::span<float> router) override {
    TANDEM_RETURN_IF_ERROR(fail("moe_input " + std::to_string(layer)));
    const PreparedLayer& L = w_.layers[layer];
    kernels::rms_norm(x_, L.vector(R::kFfnNorm), static_cast<float>(spec_.rms_norm_eps), n_,
                      spec_.hidden_size, h_);
    experts::pooled_matmul(nullptr, L.matrix(R::kRouter), h_, n_, router,
                           kernels::MatmulActivations::kFloat, scratch_);
    std::copy(h_.begin(), h_.end(), h.begin());
    return Status();
  }

  Status moe_output(size_t layer, std::span<const float> moe_sum) override {
    TANDEM_RETURN_IF_ERROR(fail("moe_output " + std::to_string(layer)));
    const PreparedLayer& L = w_.layers[layer];
    const size_t hidden = spec_.hidden_size;
    std::vector<float> ffn(moe_sum.begin(), moe_sum.end());
    if (L.has(R::kSharedGate)) {
      std::vector<float> shared(n_ * hidden);
      experts::swiglu_mlp(nullptr, L.matrix(R::kSharedGate), L.matrix(R::kSharedUp),
                          L.matrix(R::kSharedDown), h_, n_, shared, mode_, scratch_);
      if (L.has(R::kSharedExpertGate)) {
        std::vector<float> gate(n_);
        experts::pooled_matmul(nullptr, L.matrix(R::kSharedExpertGate), h_, n_, gate,
                               kernels::MatmulActivations::kFloat, scratch_);
        kernels::sigmoid(gate, gate);
        for (size_t t = 0; t < n_; ++t) {
          kernels::scale(std::span<float>(shared.data() + t * hidden, hidden), gate[t]);
        }
      }
      kernels::add(ffn, shared, ffn);
    }
    kernels::add(x_, ffn, x_);
    return Status();
  }

  Status logits(std::span<const int32_t> rows, std::span<float> out) override {
    TANDEM_RETURN_IF_ERROR(fail("logits"));
    const size_t hidden = spec_.hidden_size;
    if (rows.empty()) return Status();
    std::vector<float> hr(rows.size() * hidden);
    for (size_t i = 0; i < rows.size(); ++i) {
      std::copy_n(x_.data() + static_cast<size_t>(rows[i]) * hidden, hidden,
                  hr.data() + i * hidden);
    }
    kernels::rms_norm(hr, w_.output_norm, static_cast<float>(spec_.rms_norm_eps), rows.size(),
                      hidden, hr);
    experts::pooled_matmul(nullptr, w_.lm_head, hr, rows.size(), out, mode_, scratch_);
    return Status();
  }

  Status copy_block(BlockId src, BlockId dst) override {
    TANDEM_RETURN_IF_ERROR(fail("copy_block"));
    ++copies;
    const size_t n = pool_.block_tokens() * pool_.kv_dim();
    for (size_t l = 0; l < keys_.size(); ++l) {
      for (auto* store : {&keys_[l], &values_[l]}) {
        std::copy_n(store->data() + static_cast<size_t>(src) * n, n,
                    store->data() + static_cast<size_t>(dst) * n);
      }
    }
    return Status();
  }

 private:
  Status fail(const std::string& call) const {
    return call == fail_at ? internal_error("injected failure at " + call) : Status();
  }
  void add_bias(std::vector<float>& y, const std::vector<float>& bias) const {
    if (bias.empty()) return;
    for (size_t t = 0; t < n_; ++t) {
      std::span<float> row(y.data() + t * bias.size(), bias.size());
      kernels::add(row, bias, row);
    }
  }

  model::ModelSpec spec_;
  const PreparedWeights& w_;
  KvPool& pool_;
  kernels::MatmulActivations mode_;
  size_t max_tokens_;
  std::vector<std::vector<float>> keys_, values_;
  size_t n_ = 0;
  std::vector<float> x_, h_, tmp_;
  std::vector<int32_t> positions_, slots_, tables_;
  std::vector<DenseSequence> seqs_;
  experts::MatmulScratch scratch_;
};

}  // namespace tandem::runtime::testing
