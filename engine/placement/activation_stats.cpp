// ActivationStats, its per-thread recorder and the shared live table.
#include "engine/placement/activation_stats.h"

#include <limits>
#include <string>

#include "base/check.h"
#include "engine/model/model_spec.h"

namespace tandem::placement {

namespace {

constexpr uint64_t kMaxCount = std::numeric_limits<uint64_t>::max();

uint64_t saturating_add(uint64_t a, uint64_t b) {
  return a > kMaxCount - b ? kMaxCount : a + b;
}

std::vector<int32_t> row_map(const ModelIdentity& model) {
  std::vector<int32_t> rows(model.n_layers, -1);
  int32_t next = 0;
  for (size_t i = 0; i < model.moe_layers.size() && i < rows.size(); ++i) {
    if (model.moe_layers[i]) rows[i] = next++;
  }
  return rows;
}

}  // namespace

Result<ActivationStats> ActivationStats::create(ModelIdentity model) {
  if (model.n_layers == 0 || model.n_layers > model::kMaxLayers) {
    return invalid_argument_error("n_layers " + std::to_string(model.n_layers) +
                                  " is outside [1, " + std::to_string(model::kMaxLayers) + "]");
  }
  if (model.n_experts == 0 || model.n_experts > model::kMaxExperts) {
    return invalid_argument_error("n_experts " + std::to_string(model.n_experts) +
                                  " is outside [1, " + std::to_string(model::kMaxExperts) + "]");
  }
  if (model.n_experts_used > model.n_experts) {
    return invalid_argument_error("n_experts_used " + std::to_string(model.n_experts_used) +
                                  " exceeds n_experts " + std::to_string(model.n_experts));
  }
  if (model.moe_layers.size() != model.n_layers) {
    return invalid_argument_error("moe_layers describes " +
                                  std::to_string(model.moe_layers.size()) +
                                  " layers, the model has " + std::to_string(model.n_layers));
  }
  if (model.n_moe_layers() == 0) return invalid_argument_error("no layer is an MoE layer");
  ActivationStats s;
  s.layer_ids_ = model.moe_layer_ids();
  s.row_of_layer_ = row_map(model);
  s.counts_.assign(s.layer_ids_.size() * model.n_experts, 0);
  s.model_ = std::move(model);
  return s;
}

int64_t ActivationStats::row_of(uint64_t layer) const {
  return layer < row_of_layer_.size() ? row_of_layer_[layer] : -1;
}

uint64_t ActivationStats::total() const {
  uint64_t t = 0;
  for (uint64_t c : counts_) t = saturating_add(t, c);
  return t;
}

void ActivationStats::add(size_t row, uint64_t expert, uint64_t n) {
  TANDEM_CHECK(row < n_rows() && expert < n_experts());
  uint64_t& c = counts_[row * n_experts() + expert];
  c = saturating_add(c, n);
}

void ActivationStats::add_tokens(uint64_t n) {
  tokens_ = saturating_add(tokens_, n);
}

Status ActivationStats::merge(const ActivationStats& other) {
  TANDEM_RETURN_IF_ERROR(check_same_model(other.model_, model_));
  if (tokens_ > kMaxCount - other.tokens_) {
    return out_of_range_error("merging would overflow the token count");
  }
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (counts_[i] > kMaxCount - other.counts_[i]) {
      return out_of_range_error("merging would overflow the count of layer " +
                                std::to_string(layer_ids_[i / n_experts()]) + ", expert " +
                                std::to_string(i % n_experts()));
    }
  }
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  tokens_ += other.tokens_;
  return Status();
}

ExpertTable ActivationStats::table() const {
  ExpertTable t;
  t.layers = layer_ids_;
  t.n_experts = n_experts();
  t.values.assign(counts_.begin(), counts_.end());
  return t;
}

ActivationRecorder::ActivationRecorder(const ActivationStats& stats)
    : row_of_layer_(row_map(stats.model())),
      n_experts_(stats.n_experts()),
      counts_(stats.counts().size(), 0) {}

void ActivationRecorder::record(uint64_t layer, std::span<const int32_t> selected_expert_ids) {
  const int32_t row = layer < row_of_layer_.size() ? row_of_layer_[layer] : -1;
  if (row < 0) {
    ignored_ += selected_expert_ids.size();
    return;
  }
  uint64_t* counts = counts_.data() + static_cast<size_t>(row) * n_experts_;
  for (int32_t id : selected_expert_ids) {
    if (id >= 0 && static_cast<uint64_t>(id) < n_experts_) {
      ++counts[id];
    } else {
      ++ignored_;
    }
  }
}

void ActivationRecorder::fold_into(ActivationStats& stats) {
  TANDEM_CHECK(stats.counts().size() == counts_.size() && stats.n_experts() == n_experts_);
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (counts_[i] != 0) stats.add(i / n_experts_, i % n_experts_, counts_[i]);
    counts_[i] = 0;
  }
  stats.add_tokens(tokens_);
  tokens_ = 0;
}

ActivationRecorder SharedActivationStats::make_recorder() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ActivationRecorder(stats_);
}

void SharedActivationStats::fold(ActivationRecorder& recorder) {
  std::lock_guard<std::mutex> lock(mu_);
  recorder.fold_into(stats_);
}

ActivationStats SharedActivationStats::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace tandem::placement
