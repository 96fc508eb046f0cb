// prepare_weights: kernel views of the dense matrices, float copies of norms and biases.
#include "engine/runtime/prepared_weights.h"

#include "engine/experts/cpu_expert_worker.h"
#include "engine/model/mapped_file.h"

namespace tandem::runtime {
namespace {

Status to_float(const model::TensorInfo* t, std::vector<float>& out) {
  return experts::float_copy_of(t, out);
}

Status to_matrix(const model::TensorInfo* t, kernels::WeightMatrix& out) {
  if (t == nullptr) return Status();
  TANDEM_ASSIGN_OR_RETURN(out, experts::weight_matrix_of(*t));
  return Status();
}

// A view of slab `index` of `count` equal slabs of t's bytes as a rows x cols matrix.
Status slab_matrix(const model::TensorInfo& t, size_t index, size_t count, size_t rows, size_t cols,
                   kernels::WeightMatrix& out) {
  const size_t slab = t.data.size() / count;
  TANDEM_ASSIGN_OR_RETURN(
      out, kernels::make_weight_matrix(t.type, t.data.subspan(index * slab, slab), rows, cols));
  return Status();
}

// MLA weights: per-head views of attn_k_b / attn_v_b, or (legacy attn_kv_b, per head nope key
// rows then v_head value rows) the value rows as views and the key rows transposed into F32 (for
// kLayout, the F32 key heads' shape only).
Status prepare_mla(const model::ModelSpec& spec, const model::LayerWeights& w, PrepareUse use,
                   PreparedLayer& L) {
  const model::MlaSpec& m = spec.mla;
  const size_t heads = spec.n_heads;
  using R = model::WeightRole;
  L.k_b.resize(heads);
  L.v_b.resize(heads);
  if (m.split_kv_b) {
    for (size_t j = 0; j < heads; ++j) {
      TANDEM_RETURN_IF_ERROR(
          slab_matrix(*w[R::kAttnKB], j, heads, m.kv_lora_rank, m.qk_nope_dim, L.k_b[j]));
      TANDEM_RETURN_IF_ERROR(
          slab_matrix(*w[R::kAttnVB], j, heads, m.v_head_dim, m.kv_lora_rank, L.v_b[j]));
    }
    return Status();
  }
  kernels::WeightMatrix kv_b;
  TANDEM_RETURN_IF_ERROR(to_matrix(w[R::kAttnKvB], kv_b));
  const size_t per_head = m.qk_nope_dim + m.v_head_dim;
  const size_t lora = m.kv_lora_rank;
  if (use == PrepareUse::kCompute) L.mla_owned.assign(heads * lora * m.qk_nope_dim, 0.0f);
  std::vector<float> rows(use == PrepareUse::kCompute ? m.qk_nope_dim * lora : 0);
  for (size_t j = 0; j < heads; ++j) {
    L.v_b[j] = kv_b;  // the value rows of head j, a row range of the checkpoint's matrix
    L.v_b[j].data = kv_b.row_data(j * per_head + m.qk_nope_dim);
    L.v_b[j].rows = m.v_head_dim;
    if (use == PrepareUse::kLayout) {
      L.k_b[j] = kernels::WeightMatrix{TensorType::kF32, nullptr, lora, m.qk_nope_dim,
                                       m.qk_nope_dim * sizeof(float)};
      continue;
    }
    kernels::weight_rows_to_float(kv_b, j * per_head, j * per_head + m.qk_nope_dim, rows);
    float* kt = L.mla_owned.data() + j * lora * m.qk_nope_dim;
    for (size_t r = 0; r < m.qk_nope_dim; ++r) {
      for (size_t c = 0; c < lora; ++c) kt[c * m.qk_nope_dim + r] = rows[r * lora + c];
    }
    const auto bytes = std::as_bytes(std::span<const float>(kt, lora * m.qk_nope_dim));
    TANDEM_ASSIGN_OR_RETURN(
        L.k_b[j],
        kernels::make_weight_matrix(
            TensorType::kF32,
            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
            lora, m.qk_nope_dim));
  }
  return Status();
}

}  // namespace

Result<PreparedWeights> prepare_weights(const model::ModelSpec& spec,
                                        const model::ModelWeights& weights, PrepareUse use) {
  PreparedWeights p;
  TANDEM_RETURN_IF_ERROR(to_matrix(weights.token_embedding, p.token_embedding));
  TANDEM_RETURN_IF_ERROR(to_matrix(weights.lm_head, p.lm_head));
  TANDEM_RETURN_IF_ERROR(to_float(weights.output_norm, p.output_norm));
  p.layers.resize(weights.layers.size());
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    const model::LayerWeights& w = weights.layers[l];
    PreparedLayer& L = p.layers[l];
    L.moe = w.moe;
    for (const model::LayerRole& r : model::layer_roles()) {
      const size_t i = static_cast<size_t>(r.role);
      if (r.use == model::RoleUse::kMatrix) {
        TANDEM_RETURN_IF_ERROR(to_matrix(w[r.role], L.matrices[i]));
      } else if (r.use == model::RoleUse::kVector) {
        TANDEM_RETURN_IF_ERROR(to_float(w[r.role], L.vectors[i]));
      }
    }
    if (spec.attention == model::AttentionKind::kMla) {
      TANDEM_RETURN_IF_ERROR(prepare_mla(spec, w, use, L));
    }
  }
  return p;
}

size_t interleave_dense_matrices(PreparedWeights& w, kernels::MatmulActivations mode) {
  size_t copied = 0;
  auto interleave = [&](kernels::WeightMatrix& m) {
    if (m.data == nullptr || m.layout != kernels::WeightLayout::kRows || m.interleaved != nullptr ||
        kernels::matmul_activation_format(m.type, mode) == kernels::ActivationFormat::kF32 ||
        !kernels::interleaved_layout_preferred(m.type)) {
      return;
    }
    std::vector<uint8_t>& buffer = w.interleaved.emplace_back(kernels::interleaved_bytes(m));
    const kernels::WeightLayout layout = kernels::preferred_weight_layout(m.type);
    m.interleaved = kernels::interleave_rows8(m, buffer, layout).data;
    m.interleaved_layout = layout;
    copied += buffer.size();
    // The rows are read only where the variant lacks the copy's kernel: out of resident memory
    // until then (mapped_file.h). Not a tied head's rows: token lookups read the embedding.
    if (m.data != w.token_embedding.data) {
      model::release_copied_bytes({m.data, m.rows * m.row_bytes});
    }
  };
  for (PreparedLayer& L : w.layers) {
    for (const model::LayerRole& r : model::layer_roles()) {
      if (r.use == model::RoleUse::kMatrix && r.bulk) {
        interleave(L.matrices[static_cast<size_t>(r.role)]);
      }
    }
  }
  interleave(w.lm_head);
  return copied;
}

}  // namespace tandem::runtime
