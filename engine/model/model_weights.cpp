// ModelWeights: binding checkpoint tensors to roles and checking them against the ModelSpec.
#include "engine/model/model_weights.h"

#include <optional>
#include <string>

#include "kernels/cpu/weight_type_table.h"

namespace tandem::model {

// ---- ExpertWeights ---------------------------------------------------------------------------

ExpertWeights ExpertWeights::fused(const TensorInfo* tensor) {
  ExpertWeights w;
  w.fused_ = tensor;
  return w;
}

ExpertWeights ExpertWeights::per_expert(std::vector<const TensorInfo*> tensors) {
  ExpertWeights w;
  w.per_expert_ = std::move(tensors);
  return w;
}

uint64_t ExpertWeights::n_experts() const {
  if (fused_ != nullptr) return fused_->shape.empty() ? 0 : fused_->shape[0];
  return per_expert_.size();
}

MatrixView ExpertWeights::expert(uint64_t e) const {
  TANDEM_CHECK(e < n_experts());
  MatrixView view;
  if (fused_ != nullptr) {
    TANDEM_CHECK(fused_->shape.size() == 3);
    const uint64_t slab = fused_->data.size() / fused_->shape[0];
    view.source = fused_;
    view.type = fused_->type;
    view.rows = fused_->shape[1];
    view.cols = fused_->shape[2];
    view.data = fused_->data.subspan(e * slab, slab);
    view.file_offset = fused_->file_offset + e * slab;
    return view;
  }
  const TensorInfo* t = per_expert_[e];
  TANDEM_CHECK(t != nullptr && t->shape.size() == 2);
  view.source = t;
  view.type = t->type;
  view.rows = t->shape[0];
  view.cols = t->shape[1];
  view.data = t->data;
  view.file_offset = t->file_offset;
  return view;
}

uint64_t ExpertWeights::bytes() const {
  if (fused_ != nullptr) return fused_->data.size();
  uint64_t total = 0;
  for (const TensorInfo* t : per_expert_) total += t != nullptr ? t->data.size() : 0;
  return total;
}

std::vector<const TensorInfo*> ExpertWeights::tensors() const {
  if (fused_ != nullptr) return {fused_};
  return per_expert_;
}

std::vector<const TensorInfo*> LayerWeights::dense_tensors() const {
  return {attn_norm,   q,         k,           v,
          o,           o_bias,    sinks,       q_bias,
          k_bias,      v_bias,    q_norm,      k_norm,
          q_a,         q_a_norm,  q_b,         kv_a,
          kv_a_norm,   k_b,       v_b,         kv_b,
          ffn_norm,    router,    router_bias, selection_bias,
          shared_gate, shared_up, shared_down, shared_expert_gate,
          ffn_gate,    ffn_up,    ffn_down};
}

// ---- types -----------------------------------------------------------------------------------

bool is_supported_vector_type(TensorType type) {
  return type == TensorType::kF32 || type == TensorType::kF16 || type == TensorType::kBF16;
}

bool is_supported_matrix_type(TensorType type) {
  return kernels::weight_type_kernels(type) != nullptr;
}

// ---- binding ---------------------------------------------------------------------------------

namespace {

std::string shape_string(std::span<const uint64_t> shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

// Slots of one layer before checking.
struct LayerSlots {
  std::vector<const TensorInfo*> single;                   // indexed by WeightRole
  std::vector<const TensorInfo*> fused;                    // gate, up, down
  std::vector<std::vector<const TensorInfo*>> per_expert;  // [projection][expert]
};

constexpr size_t kRoleCount = kWeightRoleCount;

size_t projection_index(WeightRole role) {
  return role == WeightRole::kExpertGate ? 0 : role == WeightRole::kExpertUp ? 1 : 2;
}

class Binder {
 public:
  Binder(const ModelSpec& spec, TensorNaming naming) : spec_(spec), naming_(naming) {
    layers_.resize(spec.n_layers);
    for (LayerSlots& l : layers_) {
      l.single.assign(kRoleCount, nullptr);
      l.fused.assign(3, nullptr);
      l.per_expert.assign(3, {});
    }
  }

  void add(const TensorInfo& t) {
    std::optional<CanonicalName> name = naming_ == TensorNaming::kGguf
                                            ? canonical_from_gguf(t.name, spec_.architecture)
                                            : canonical_from_hf(t.name, spec_.architecture);
    if (!name) {
      weights_.unused.push_back(&t);
      return;
    }
    if (name->layer < 0) {
      const TensorInfo** slot = name->role == WeightRole::kTokenEmbedding ? &embedding_
                                : name->role == WeightRole::kOutputNorm   ? &output_norm_
                                                                          : &lm_head_;
      place(slot, t);
      return;
    }
    if (static_cast<uint64_t>(name->layer) >= spec_.n_layers) {
      weights_.unused.push_back(&t);
      return;
    }
    LayerSlots& l = layers_[static_cast<size_t>(name->layer)];
    if (!is_expert_role(name->role)) {
      place(&l.single[static_cast<size_t>(name->role)], t);
      return;
    }
    const size_t p = projection_index(name->role);
    if (name->expert < 0) {
      place(&l.fused[p], t);
      return;
    }
    if (static_cast<uint64_t>(name->expert) >= spec_.n_experts) {
      problem(t.name + ": expert index " + std::to_string(name->expert) + " >= n_experts (" +
              std::to_string(spec_.n_experts) + ")");
      return;
    }
    auto& list = l.per_expert[p];
    if (list.empty()) list.assign(spec_.n_experts, nullptr);
    place(&list[static_cast<size_t>(name->expert)], t);
  }

  Result<ModelWeights> finish() {
    const uint64_t vocab = spec_.vocab_size;
    const uint64_t hidden = spec_.hidden_size;
    weights_.token_embedding = require(embedding_, {WeightRole::kTokenEmbedding}, true);
    check_shape(weights_.token_embedding, {vocab, hidden}, "(vocab_size, hidden_size)");
    weights_.output_norm = require(output_norm_, {WeightRole::kOutputNorm}, false);
    check_shape(weights_.output_norm, {hidden}, "(hidden_size)");
    if (lm_head_ == nullptr && spec_.tied_embeddings) {
      weights_.lm_head = weights_.token_embedding;
      weights_.tied_embeddings = true;
    } else {
      weights_.lm_head = require(lm_head_, {WeightRole::kLmHead}, true);
      check_shape(weights_.lm_head, {vocab, hidden}, "(vocab_size, hidden_size)");
    }
    weights_.layers.resize(spec_.n_layers);
    for (uint64_t i = 0; i < spec_.n_layers; ++i) bind_layer(static_cast<int64_t>(i));
    if (!problems_.empty()) {
      std::string message = "checkpoint does not match its " +
                            std::string(architecture_name(spec_.architecture)) + " spec (" +
                            std::to_string(problems_.size()) + " problem" +
                            (problems_.size() == 1 ? "" : "s") + "):";
      for (const std::string& p : problems_) message += "\n  " + p;
      return invalid_argument_error(std::move(message));
    }
    return std::move(weights_);
  }

 private:
  void problem(std::string text) { problems_.push_back(std::move(text)); }

  void place(const TensorInfo** slot, const TensorInfo& t) {
    if (*slot != nullptr) {
      problem("tensors " + (*slot)->name + " and " + t.name + " hold the same weight");
      return;
    }
    *slot = &t;
  }

  std::string file_name(const CanonicalName& name) const {
    return file_tensor_name(name, naming_, spec_.architecture);
  }

  // Reports a missing tensor; checks the type of a present one. Returns t.
  const TensorInfo* require(const TensorInfo* t, const CanonicalName& name, bool matrix) {
    if (t == nullptr) {
      problem("missing tensor " + file_name(name));
      return nullptr;
    }
    const bool ok = matrix ? is_supported_matrix_type(t->type) : is_supported_vector_type(t->type);
    if (!ok) {
      problem(t->name + ": type " + std::string(tensor_type_name(t->type)) + " is not supported" +
              (matrix ? " for matrices (supported: " + kernels::weight_type_names() + ")"
                      : " for norms and biases (F32, F16, BF16)"));
    }
    return t;
  }

  void check_shape(const TensorInfo* t, std::vector<uint64_t> expected, std::string_view what) {
    if (t == nullptr || t->shape == expected) return;
    problem(t->name + ": shape " + shape_string(t->shape) + ", expected " + shape_string(expected) +
            " " + std::string(what));
  }

  // Matrices are split into row slabs by experts and rows by kernels: the inner dimension must be
  // a whole number of quantization blocks.
  void check_blocks(const TensorInfo* t) {
    if (t == nullptr || t->shape.empty()) return;
    std::optional<TensorTypeTraits> tr = tensor_type_traits(t->type);
    if (tr && t->shape.back() % tr->block_elements != 0) {
      problem(t->name + ": inner dimension " + std::to_string(t->shape.back()) +
              " is not a multiple of the " + std::string(tr->name) + " block size " +
              std::to_string(tr->block_elements));
    }
  }

  const TensorInfo* single(LayerSlots& l, int64_t layer, WeightRole role, bool matrix,
                           std::vector<uint64_t> shape, std::string_view what) {
    const TensorInfo* t =
        require(l.single[static_cast<size_t>(role)], CanonicalName{role, layer}, matrix);
    check_shape(t, std::move(shape), what);
    if (matrix) check_blocks(t);
    return t;
  }

  ExpertWeights bind_experts(LayerSlots& l, int64_t layer, WeightRole role, uint64_t rows,
                             uint64_t cols, std::string_view what) {
    const size_t p = projection_index(role);
    const TensorInfo* fused = l.fused[p];
    std::vector<const TensorInfo*>& list = l.per_expert[p];
    if (fused != nullptr && !list.empty()) {
      problem("layer " + std::to_string(layer) + " " + std::string(weight_role_name(role)) +
              ": both a fused tensor (" + fused->name + ") and per-expert tensors");
      return {};
    }
    if (fused != nullptr) {
      require(fused, CanonicalName{role, layer}, true);
      check_shape(fused, {spec_.n_experts, rows, cols}, what);
      check_blocks(fused);
      return ExpertWeights::fused(fused);
    }
    if (list.empty()) {
      problem("missing tensor " + file_name(CanonicalName{role, layer}) + " (or its " +
              std::to_string(spec_.n_experts) + " per-expert tensors)");
      return {};
    }
    std::string missing;
    uint64_t n_missing = 0;
    for (size_t e = 0; e < list.size(); ++e) {
      if (list[e] == nullptr) {
        if (++n_missing <= 8) missing += (missing.empty() ? "" : ", ") + std::to_string(e);
        continue;
      }
      require(list[e], CanonicalName{role, layer, static_cast<int64_t>(e)}, true);
      check_shape(list[e], {rows, cols}, what);
      check_blocks(list[e]);
    }
    if (n_missing > 0) {
      problem("layer " + std::to_string(layer) + " " + std::string(weight_role_name(role)) +
              ": missing " + std::to_string(n_missing) + " of " + std::to_string(list.size()) +
              " experts (" + missing + (n_missing > 8 ? ", ..." : "") + "), e.g. " +
              file_name(CanonicalName{role, layer, static_cast<int64_t>(first_null(list))}));
      return {};
    }
    return ExpertWeights::per_expert(list);
  }

  static size_t first_null(const std::vector<const TensorInfo*>& list) {
    for (size_t e = 0; e < list.size(); ++e) {
      if (list[e] == nullptr) return e;
    }
    return 0;
  }

  // MLA attention: the low-rank q (or one q projection), the compressed KV projection and its
  // norm, the per-head key/value up-projections (split or legacy), the output projection.
  void bind_mla(LayerSlots& l, int64_t i, LayerWeights& w) {
    const ModelSpec& s = spec_;
    const MlaSpec& m = s.mla;
    const uint64_t h = s.hidden_size;
    const uint64_t q_width = s.n_heads * m.q_head_dim();
    if (m.q_lora_rank > 0) {
      w.q_a = single(l, i, WeightRole::kAttnQA, true, {m.q_lora_rank, h}, "(q_lora_rank, hidden)");
      w.q_a_norm = single(l, i, WeightRole::kAttnQANorm, false, {m.q_lora_rank}, "(q_lora_rank)");
      w.q_b = single(l, i, WeightRole::kAttnQB, true, {q_width, m.q_lora_rank},
                     "(n_heads*(qk_nope+qk_rope), q_lora_rank)");
    } else {
      w.q = single(l, i, WeightRole::kAttnQ, true, {q_width, h},
                   "(n_heads*(qk_nope+qk_rope), hidden)");
    }
    w.kv_a = single(l, i, WeightRole::kAttnKvA, true, {m.cache_row(), h},
                    "(kv_lora_rank+qk_rope, hidden)");
    w.kv_a_norm = single(l, i, WeightRole::kAttnKvANorm, false, {m.kv_lora_rank}, "(kv_lora_rank)");
    if (m.split_kv_b) {
      w.k_b = single(l, i, WeightRole::kAttnKB, true, {s.n_heads, m.kv_lora_rank, m.qk_nope_dim},
                     "(n_heads, kv_lora_rank, qk_nope)");
      w.v_b = single(l, i, WeightRole::kAttnVB, true, {s.n_heads, m.v_head_dim, m.kv_lora_rank},
                     "(n_heads, v_head, kv_lora_rank)");
    } else {
      w.kv_b = single(l, i, WeightRole::kAttnKvB, true,
                      {s.n_heads * (m.qk_nope_dim + m.v_head_dim), m.kv_lora_rank},
                      "(n_heads*(qk_nope+v_head), kv_lora_rank)");
    }
    w.o = single(l, i, WeightRole::kAttnO, true, {h, s.attn_out_dim()}, "(hidden, n_heads*v_head)");
  }

  void bind_layer(int64_t i) {
    LayerSlots& l = layers_[static_cast<size_t>(i)];
    LayerWeights& w = weights_.layers[static_cast<size_t>(i)];
    const ModelSpec& s = spec_;
    const uint64_t h = s.hidden_size;
    w.attn_norm = single(l, i, WeightRole::kAttnNorm, false, {h}, "(hidden_size)");
    if (s.attention == AttentionKind::kMla) {
      bind_mla(l, i, w);
    } else {
      bind_gqa(l, i, w);
    }
    bind_ffn(l, i, w);
  }

  void bind_gqa(LayerSlots& l, int64_t i, LayerWeights& w) {
    const ModelSpec& s = spec_;
    const uint64_t h = s.hidden_size;
    w.q = single(l, i, WeightRole::kAttnQ, true, {s.q_dim(), h}, "(n_heads*head_dim, hidden)");
    w.k = single(l, i, WeightRole::kAttnK, true, {s.kv_dim(), h}, "(n_kv_heads*head_dim, hidden)");
    w.v = single(l, i, WeightRole::kAttnV, true, {s.kv_dim(), h}, "(n_kv_heads*head_dim, hidden)");
    w.o = single(l, i, WeightRole::kAttnO, true, {h, s.q_dim()}, "(hidden, n_heads*head_dim)");
    if (s.attn_out_bias) {
      w.o_bias = single(l, i, WeightRole::kAttnOBias, false, {h}, "(hidden_size)");
    }
    if (s.attn_sinks) {
      w.sinks = single(l, i, WeightRole::kAttnSinks, false, {s.n_heads}, "(n_heads)");
    }
    if (s.attn_qkv_bias) {
      w.q_bias = single(l, i, WeightRole::kAttnQBias, false, {s.q_dim()}, "(n_heads*head_dim)");
      w.k_bias = single(l, i, WeightRole::kAttnKBias, false, {s.kv_dim()}, "(kv dim)");
      w.v_bias = single(l, i, WeightRole::kAttnVBias, false, {s.kv_dim()}, "(kv dim)");
    }
    if (s.qk_norm == QkNorm::kPerHead) {
      w.q_norm = single(l, i, WeightRole::kAttnQNorm, false, {s.head_dim}, "(head_dim)");
      w.k_norm = single(l, i, WeightRole::kAttnKNorm, false, {s.head_dim}, "(head_dim)");
    } else if (s.qk_norm == QkNorm::kWholeProjection) {
      w.q_norm = single(l, i, WeightRole::kAttnQNorm, false, {s.q_dim()}, "(n_heads*head_dim)");
      w.k_norm = single(l, i, WeightRole::kAttnKNorm, false, {s.kv_dim()}, "(n_kv_heads*head_dim)");
    }
  }

  void bind_ffn(LayerSlots& l, int64_t i, LayerWeights& w) {
    const ModelSpec& s = spec_;
    const uint64_t h = s.hidden_size;
    w.ffn_norm = single(l, i, WeightRole::kFfnNorm, false, {h}, "(hidden_size)");
    w.moe = static_cast<size_t>(i) < s.moe_layers.size() && s.moe_layers[static_cast<size_t>(i)];
    if (!w.moe) {
      const uint64_t f = s.dense_ffn_size;
      w.ffn_gate = single(l, i, WeightRole::kDenseGate, true, {f, h}, "(dense_ffn, hidden)");
      w.ffn_up = single(l, i, WeightRole::kDenseUp, true, {f, h}, "(dense_ffn, hidden)");
      w.ffn_down = single(l, i, WeightRole::kDenseDown, true, {h, f}, "(hidden, dense_ffn)");
      return;
    }
    w.router = single(l, i, WeightRole::kRouter, true, {s.n_experts, h}, "(n_experts, hidden)");
    const uint64_t f = s.expert_ffn_size;
    const uint64_t ne = s.n_experts;
    if (s.router_bias) {
      w.router_bias = single(l, i, WeightRole::kRouterBias, false, {ne}, "(n_experts)");
    }
    if (s.router_selection_bias) {
      w.selection_bias = single(l, i, WeightRole::kRouterSelectionBias, false, {ne}, "(n_experts)");
    }
    if (s.expert_bias) {
      w.experts_gate_bias =
          single(l, i, WeightRole::kExpertGateBias, false, {ne, f}, "(n_experts, expert_ffn)");
      w.experts_up_bias =
          single(l, i, WeightRole::kExpertUpBias, false, {ne, f}, "(n_experts, expert_ffn)");
      w.experts_down_bias =
          single(l, i, WeightRole::kExpertDownBias, false, {ne, h}, "(n_experts, hidden)");
    }
    w.experts_gate = bind_experts(l, i, WeightRole::kExpertGate, f, h, "(expert_ffn, hidden)");
    w.experts_up = bind_experts(l, i, WeightRole::kExpertUp, f, h, "(expert_ffn, hidden)");
    w.experts_down = bind_experts(l, i, WeightRole::kExpertDown, h, f, "(hidden, expert_ffn)");
    if (s.n_shared_experts > 0) {
      const uint64_t sf = s.shared_expert_ffn_size;
      w.shared_gate = single(l, i, WeightRole::kSharedGate, true, {sf, h}, "(shared_ffn, hidden)");
      w.shared_up = single(l, i, WeightRole::kSharedUp, true, {sf, h}, "(shared_ffn, hidden)");
      w.shared_down = single(l, i, WeightRole::kSharedDown, true, {h, sf}, "(hidden, shared_ffn)");
    }
    if (s.shared_expert_gate) {
      const TensorInfo* g = l.single[static_cast<size_t>(WeightRole::kSharedExpertGate)];
      const bool vector_shape = g != nullptr && g->shape == std::vector<uint64_t>{h};
      w.shared_expert_gate =
          single(l, i, WeightRole::kSharedExpertGate, true,
                 vector_shape ? std::vector<uint64_t>{h} : std::vector<uint64_t>{1, h},
                 "([1, hidden] or [hidden])");
    }
  }

  const ModelSpec& spec_;
  TensorNaming naming_;
  ModelWeights weights_;
  std::vector<LayerSlots> layers_;
  const TensorInfo* embedding_ = nullptr;
  const TensorInfo* output_norm_ = nullptr;
  const TensorInfo* lm_head_ = nullptr;
  std::vector<std::string> problems_;
};

}  // namespace

Result<ModelWeights> bind_weights(const ModelSpec& spec, std::span<const TensorInfo> tensors,
                                  TensorNaming naming) {
  if (spec.n_layers > kMaxLayers || spec.n_experts > kMaxExperts) {
    return invalid_argument_error("cannot bind weights: n_layers " + std::to_string(spec.n_layers) +
                                  " or n_experts " + std::to_string(spec.n_experts) +
                                  " exceeds the limits");
  }
  Binder binder(spec, naming);
  for (const TensorInfo& t : tensors) binder.add(t);
  return binder.finish();
}

}  // namespace tandem::model
