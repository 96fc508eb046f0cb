// ModelWeights: binding checkpoint tensors to roles and checking them against the ModelSpec.
#include "engine/model/model_weights.h"

#include <algorithm>
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

const ExpertWeights& LayerWeights::experts(WeightRole role) const {
  TANDEM_CHECK(is_expert_role(role));
  return role == WeightRole::kExpertGate ? experts_gate
         : role == WeightRole::kExpertUp ? experts_up
                                         : experts_down;
}

ExpertWeights& LayerWeights::experts(WeightRole role) {
  const LayerWeights& self = *this;
  return const_cast<ExpertWeights&>(self.experts(role));
}

std::vector<const TensorInfo*> LayerWeights::tensors_of(RoleUse use) const {
  std::vector<const TensorInfo*> out;
  for (const LayerRole& r : layer_roles()) {
    if (r.use != use) continue;
    if (use == RoleUse::kExperts) {
      for (const TensorInfo* t : experts(r.role).tensors()) out.push_back(t);
    } else if ((*this)[r.role] != nullptr) {
      out.push_back((*this)[r.role]);
    }
  }
  return out;
}

std::vector<const TensorInfo*> LayerWeights::dense_tensors() const {
  std::vector<const TensorInfo*> out;
  for (const LayerRole& r : layer_roles()) {
    const TensorInfo* t = (*this)[r.role];
    if (t != nullptr && r.use != RoleUse::kExperts && r.use != RoleUse::kExpertBias) {
      out.push_back(t);
    }
  }
  return out;
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

  // The tensor of `role` in layer `layer`: present, of a supported type, of one of the shapes.
  const TensorInfo* single(LayerSlots& l, int64_t layer, WeightRole role, bool matrix,
                           const RoleShape& shape) {
    const TensorInfo* t =
        require(l.single[static_cast<size_t>(role)], CanonicalName{role, layer}, matrix);
    if (t != nullptr &&
        std::find(shape.accepted.begin(), shape.accepted.end(), t->shape) == shape.accepted.end()) {
      check_shape(t, shape.accepted.front(), shape.what);
    }
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

  // Every role of the table that a layer of this kind has, with the shape the spec implies.
  void bind_layer(int64_t i) {
    LayerSlots& l = layers_[static_cast<size_t>(i)];
    LayerWeights& w = weights_.layers[static_cast<size_t>(i)];
    const ModelSpec& s = spec_;
    w.moe = static_cast<size_t>(i) < s.moe_layers.size() && s.moe_layers[static_cast<size_t>(i)];
    for (const LayerRole& r : layer_roles()) {
      const RoleShape shape = r.shape(s, w.moe);
      if (shape.accepted.empty()) continue;
      if (r.use == RoleUse::kExperts) {
        const std::vector<uint64_t>& one = shape.accepted.front();
        w.experts(r.role) = bind_experts(l, i, r.role, one[0], one[1], shape.what);
        continue;
      }
      const bool matrix = r.use == RoleUse::kMatrix || r.use == RoleUse::kHeadMatrices;
      w.tensors[static_cast<size_t>(r.role)] = single(l, i, r.role, matrix, shape);
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
