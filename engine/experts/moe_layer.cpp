// MoeLayer: split pairs by the ExpertMap, run each worker's share, combine in slot order.
#include "engine/experts/moe_layer.h"

#include <algorithm>
#include <string>

#include "engine/base/check.h"
#include "kernels/cpu/vector_ops.h"

namespace tandem::experts {

ExpertMap ExpertMap::uniform(size_t n_layers, size_t n_experts, uint8_t worker) {
  ExpertMap map;
  map.n_layers_ = n_layers;
  map.n_experts_ = n_experts;
  map.owner_.assign(n_layers * n_experts, worker);
  return map;
}

uint8_t ExpertMap::worker(size_t layer, size_t expert) const {
  TANDEM_CHECK(layer < n_layers_ && expert < n_experts_);
  return owner_[layer * n_experts_ + expert];
}

void ExpertMap::set(size_t layer, size_t expert, uint8_t worker) {
  TANDEM_CHECK(layer < n_layers_ && expert < n_experts_);
  owner_[layer * n_experts_ + expert] = worker;
}

std::span<const uint8_t> ExpertMap::layer(size_t layer) const {
  if (owner_.empty()) return {};
  TANDEM_CHECK(layer < n_layers_);
  return std::span<const uint8_t>(owner_).subspan(layer * n_experts_, n_experts_);
}

MoeLayer::MoeLayer(std::vector<ExpertWorker*> workers) : workers_(std::move(workers)) {
  TANDEM_CHECK(!workers_.empty());
  groups_.resize(workers_.size());
}

Status MoeLayer::run(size_t layer, size_t n_experts, std::span<const float> input, size_t n_tokens,
                     size_t hidden, const Routing& routing, const ExpertMap& map,
                     std::span<float> out) {
  TANDEM_CHECK(input.size() == n_tokens * hidden && out.size() == n_tokens * hidden);
  TANDEM_CHECK(routing.n_tokens == n_tokens);
  std::span<const uint8_t> owner;
  if (map.n_layers() != 0) {
    if (layer >= map.n_layers() || map.n_experts() != n_experts) {
      return invalid_argument_error(
          "expert map covers " + std::to_string(map.n_layers()) + " layers x " +
          std::to_string(map.n_experts()) + " experts; layer " + std::to_string(layer) +
          " of a model with " + std::to_string(n_experts) + " experts asked");
    }
    owner = map.layer(layer);
    for (uint8_t w : owner) {
      if (w >= workers_.size()) {
        return invalid_argument_error("expert map names worker " + std::to_string(w) +
                                      " but only " + std::to_string(workers_.size()) + " exist");
      }
    }
  }
  const size_t k = routing.k;
  const size_t n_pairs = n_tokens * k;
  if (pair_out_.size() < n_pairs * hidden) pair_out_.resize(n_pairs * hidden);
  std::span<float> pair_out(pair_out_.data(), n_pairs * hidden);
  for (size_t w = 0; w < workers_.size(); ++w) {
    if (owner.empty() && w > 0) break;
    group_by_expert(routing, n_experts, owner, static_cast<uint8_t>(w), groups_[w]);
    if (groups_[w].expert_ids.empty()) continue;
    ExpertJob job;
    job.layer = layer;
    job.input = input;
    job.n_tokens = n_tokens;
    job.hidden = hidden;
    job.k = k;
    job.groups = &groups_[w];
    job.pair_out = pair_out;
    TANDEM_RETURN_IF_ERROR(workers_[w]->run(job));
  }
  std::fill(out.begin(), out.end(), 0.0f);
  for (size_t t = 0; t < n_tokens; ++t) {
    std::span<float> acc = out.subspan(t * hidden, hidden);
    for (size_t s = 0; s < k; ++s) {
      const size_t p = t * k + s;
      kernels::add_scaled(acc, pair_out.subspan(p * hidden, hidden), routing.weights[p]);
    }
  }
  return Status();
}

}  // namespace tandem::experts
