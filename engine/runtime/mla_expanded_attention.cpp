// CpuDenseExecutor's MLA attention in the expanded form (MlaPrefill::kExpanded) for one sequence:
// the cached latent rows of its whole context become each head's keys [k_b^T c | k_pe] and values
// v_b c, and each head runs ordinary causal attention over them. The choice between this and the
// absorbed form (mla_attention_layer.cpp) is mla_expanded().
#include <algorithm>
#include <vector>

#include "engine/runtime/cpu_dense_executor.h"
#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kv_type.h"
#include "kernels/cpu/matmul.h"

namespace tandem::runtime {
namespace {

// Positions [0, n) of a keys-only cache of `row` elements per position, as floats: the first
// `lora` of each into lat (n x lora), the rest into pe (n x (row - lora)).
void read_latent_rows(const kernels::KvBlocks& kv, size_t row, size_t lora, size_t n,
                      std::vector<float>& lat, std::vector<float>& pe) {
  const size_t elem = kernels::kv_type_bytes(kv.type);
  const size_t rope = row - lora;
  lat.resize(n * lora);
  pe.resize(n * rope);
  for (size_t p = 0; p < n; ++p) {
    const size_t block = static_cast<size_t>(kv.table[p / kv.block_rows]);
    const uint8_t* src = static_cast<const uint8_t*>(kv.keys) +
                         (block * kv.block_rows + p % kv.block_rows) * row * elem;
    kernels::load_kv_elements(kv.type, src, lat.data() + p * lora, lora);
    kernels::load_kv_elements(kv.type, src + lora * elem, pe.data() + p * rope, rope);
  }
}

}  // namespace

size_t mla_expanded_bytes(const model::ModelSpec& spec, size_t threads, size_t n_ctx) {
  const model::MlaSpec& m = spec.mla;
  const size_t width = std::max(m.q_head_dim(), m.v_head_dim);
  const size_t busy = std::max<size_t>(1, std::min<size_t>(threads, spec.n_heads));
  // The latent rows (float and quantized, at most 4 + 2 bytes per element), the rope parts, and
  // per busy thread one head's keys and values.
  return n_ctx * (m.kv_lora_rank * 6 + m.qk_rope_dim * 4 + busy * 2 * width * sizeof(float));
}

bool mla_auto_expands(const model::ModelSpec& spec, size_t threads, size_t start_pos,
                      size_t n_new) {
  const model::MlaSpec& m = spec.mla;
  const double n = static_cast<double>(n_new);
  const double start = static_cast<double>(start_pos);
  // Multiply-adds per head beyond what both forms share. Absorbed: per query-key pair the latent
  // row (scores) and its first kv_lora (values); per token q_nope through k_b and the latent
  // output through v_b. Expanded: per pair q_head + v_head; per context position its key and
  // value through k_b^T and v_b.
  const double pairs = n * start + n * (n + 1) / 2;
  const double per_map = static_cast<double>((m.qk_nope_dim + m.v_head_dim) * m.kv_lora_rank);
  const double absorbed = pairs * static_cast<double>(m.cache_row() + m.kv_lora_rank) + n * per_map;
  const double expanded =
      pairs * static_cast<double>(m.q_head_dim() + m.v_head_dim) + (start + n) * per_map;
  return n_new >= kMlaExpandedMinTokens && expanded < absorbed &&
         mla_expanded_bytes(spec, threads, start_pos + n_new) <= kMlaExpandedMaxBytes;
}

bool CpuDenseExecutor::mla_expanded(size_t s) const {
  if (mla_prefill_ != MlaPrefill::kAuto) return mla_prefill_ == MlaPrefill::kExpanded;
  const SequenceInput& seq = seqs_[s];
  return mla_auto_expands(spec_, pool_->n_threads(), seq.start_pos, seq.tokens.size());
}

const std::vector<float>& CpuDenseExecutor::mla_k_b_t(size_t layer) {
  if (mla_k_b_t_.size() < spec_.n_layers) mla_k_b_t_.resize(spec_.n_layers);
  std::vector<float>& out = mla_k_b_t_[layer];
  if (!out.empty()) return out;
  const std::vector<kernels::WeightMatrix>& k_b = weights_.layers[layer].k_b;
  const size_t lora = spec_.mla.kv_lora_rank;
  const size_t nope = spec_.mla.qk_nope_dim;
  out.resize(k_b.size() * nope * lora);
  std::vector<float> rows(lora * nope);
  for (size_t j = 0; j < k_b.size(); ++j) {
    TANDEM_CHECK(k_b[j].rows == lora && k_b[j].cols == nope);
    kernels::weight_rows_to_float(k_b[j], 0, lora, rows);
    float* t = out.data() + j * nope * lora;
    for (size_t l = 0; l < lora; ++l) {
      for (size_t d = 0; d < nope; ++d) t[d * lora + l] = rows[l * nope + d];
    }
  }
  return out;
}

void CpuDenseExecutor::mla_expanded_attention(size_t layer, size_t s) {
  const PreparedLayer& L = weights_.layers[layer];
  const model::MlaSpec& m = spec_.mla;
  const SequenceInput& seq = seqs_[s];
  const size_t ns = seq.tokens.size();
  const size_t n_ctx = seq.start_pos + ns;
  const size_t heads = spec_.n_heads;
  const size_t lora = m.kv_lora_rank;
  const size_t rope = m.qk_rope_dim;
  const size_t nope = m.qk_nope_dim;
  const size_t q_head = m.q_head_dim();
  const size_t row = m.cache_row();
  const size_t v_head = m.v_head_dim;
  const std::vector<float>& k_b_t = mla_k_b_t(layer);

  std::vector<float> lat, pe;
  read_latent_rows(seq.cache->blocks(layer, n_ctx), row, lora, n_ctx, lat, pe);
  const kernels::ActivationRows lat_f{kernels::ActivationFormat::kF32, n_ctx, lora, lat.data()};
  // The latent rows in the format v_b's type meets (every head's v_b has the same type).
  const kernels::ActivationFormat v_format =
      kernels::matmul_activation_format(L.v_b[0].type, mode_);
  kernels::QuantizedActivations lat_q;
  kernels::ActivationRows lat_v = lat_f;
  if (v_format != kernels::ActivationFormat::kF32) {
    kernels::quantize_activations(v_format, lat, n_ctx, lora, lat_q);
    lat_v = kernels::view_of(lat_q);
  }

  kernels::AttentionConfig cfg;
  cfg.n_heads = 1;
  cfg.n_kv_heads = 1;
  // Keys and values share the row width the attention kernel reads (values at most as wide as
  // keys): rows of width floats, queries and keys zero-padded where v_head is the wider, which
  // adds exact zeros to every score.
  const size_t width = std::max(q_head, v_head);
  cfg.head_dim = width;
  cfg.value_dim = v_head;
  cfg.scale = static_cast<float>(spec_.attn_scale);
  const size_t t0 = token_offset_[s];
  // One head per work item: its keys and values over the context (mla_expanded_bytes), its
  // queries, its attention.
  auto run = [&](size_t j0, size_t j1) {
    std::vector<float> keys(n_ctx * width, 0.0f), values(n_ctx * width, 0.0f);
    std::vector<float> q(ns * width, 0.0f), o(ns * v_head);
    for (size_t j = j0; j < j1; ++j) {
      kernels::WeightMatrix kbt;
      kbt.type = TensorType::kF32;
      kbt.data = reinterpret_cast<const uint8_t*>(k_b_t.data() + j * nope * lora);
      kbt.rows = nope;
      kbt.cols = lora;
      kbt.row_bytes = lora * sizeof(float);
      kernels::matmul_rows(kbt, lat_f, keys.data(), width, 0, nope);
      kernels::matmul_rows(L.v_b[j], lat_v, values.data(), width, 0, v_head);
      for (size_t p = 0; p < n_ctx; ++p) {
        std::copy_n(pe.data() + p * rope, rope, keys.data() + p * width + nope);
      }
      // Query i: q_nope as projected (mla_q_), q_pe as rotated into the absorbed queries (q_).
      for (size_t i = 0; i < ns; ++i) {
        const size_t t = t0 + i;
        std::copy_n(mla_q_.data() + (t * heads + j) * q_head, nope, q.data() + i * width);
        std::copy_n(q_.data() + (t * heads + j) * row + lora, rope, q.data() + i * width + nope);
      }
      kernels::attention(q, ns, seq.start_pos, keys, values, cfg, o);
      for (size_t i = 0; i < ns; ++i) {
        std::copy_n(o.data() + i * v_head, v_head,
                    mla_heads_.data() + ((t0 + i) * heads + j) * v_head);
      }
    }
  };
  if (pool_->n_threads() == 1) {
    run(0, heads);
  } else {
    pool_->parallel_for(0, heads, 1, run);
  }
}

}  // namespace tandem::runtime
