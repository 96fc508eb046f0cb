// plan_placement: the frequency, uniform and budget policies over an ExpertTable.
#include "engine/placement/planner.h"

#include <algorithm>
#include <bit>
#include <numeric>

#include <spdlog/spdlog.h>

#include "engine/model/model_spec.h"

namespace tandem::placement {

namespace {

// The planner's total order over flat indices: value descending, then index ascending (rows are
// layers in ascending order and row-major, so index ascending = layer, then expert ascending).
struct ByFrequency {
  const double* v;
  bool operator()(uint32_t a, uint32_t b) const { return v[a] > v[b] || (v[a] == v[b] && a < b); }
};

// The same order as sortable keys: for finite v >= 0 the IEEE-754 bit pattern grows with v, so
// (~bits, index) ascending is (value descending, index ascending). -0.0 is folded into +0.0.
using RankKey = std::pair<uint64_t, uint32_t>;

std::vector<RankKey> rank_keys(const std::vector<double>& values) {
  std::vector<RankKey> keys(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i] == 0.0 ? 0.0 : values[i];
    keys[i] = {~std::bit_cast<uint64_t>(v), static_cast<uint32_t>(i)};
  }
  return keys;
}

Status check_shape(const char* what, const std::vector<uint32_t>& layers, uint64_t n_experts,
                   const std::vector<uint32_t>& their_layers, uint64_t their_experts) {
  if (their_layers != layers || their_experts != n_experts) {
    return invalid_argument_error(
        std::string(what) + " have " + std::to_string(their_layers.size()) + " layers x " +
        std::to_string(their_experts) + " experts, the model " + std::to_string(layers.size()) +
        " x " + std::to_string(n_experts) + " (or other layer indices)");
  }
  return Status();
}

void warn(Placement& p, std::string message) {
  spdlog::warn("placement: {}", message);
  p.warnings.push_back(std::move(message));
}

uint64_t clamp_k(int64_t k, uint64_t total) {
  if (k <= 0) return 0;
  return std::min(static_cast<uint64_t>(k), total);
}

void plan_frequency(const ExpertTable& stats, uint64_t k, DeviceMap& map) {
  const uint64_t total = stats.values.size();
  const uint64_t e = stats.n_experts;
  if (k == total) {
    for (uint64_t i = 0; i < total; ++i) map.set_row(i / e, i % e, Device::kGpu);
    return;
  }
  if (k == 0) return;
  std::vector<RankKey> keys = rank_keys(stats.values);
  std::nth_element(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(k), keys.end());
  for (uint64_t i = 0; i < k; ++i)
    map.set_row(keys[i].second / e, keys[i].second % e, Device::kGpu);
}

void plan_uniform(const ExpertTable* stats, uint64_t k, DeviceMap& map) {
  const size_t rows = map.layers().size();
  const uint64_t e = map.n_experts();
  const uint64_t per = k / rows;
  const uint64_t extra = k % rows;
  std::vector<uint32_t> idx(e);
  for (size_t r = 0; r < rows; ++r) {
    const uint64_t n = per + (r < extra ? 1 : 0);
    if (n == 0) continue;
    std::iota(idx.begin(), idx.end(), 0u);
    if (stats != nullptr && n < e) {
      std::nth_element(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(n), idx.end(),
                       ByFrequency{stats->values.data() + r * e});
    }
    for (uint64_t i = 0; i < n; ++i) map.set_row(r, idx[i], Device::kGpu);
  }
}

void plan_budget(const ExpertTable* stats, const ExpertSizes& sizes, uint64_t budget,
                 DeviceMap& map) {
  const uint64_t e = map.n_experts();
  const uint64_t total = map.layers().size() * e;
  // The budget is GPU memory: each expert counts what the GPU expert worker allocates for it.
  const std::vector<uint64_t>& device = sizes.device_bytes;
  if (stats != nullptr && total > 0 &&
      std::all_of(device.begin(), device.end(), [&](uint64_t b) { return b == device[0]; })) {
    // Every expert has the same size (one weight type throughout, the usual case): first fit in
    // frequency order takes exactly the k most frequent, k = budget / size, so a selection
    // (linear) gives the same set as the full sort below.
    const uint64_t size = device[0];
    plan_frequency(*stats, size == 0 ? total : std::min(total, budget / size), map);
    return;
  }
  std::vector<uint32_t> idx(total);
  std::iota(idx.begin(), idx.end(), 0u);
  if (stats != nullptr) {
    std::vector<RankKey> keys = rank_keys(stats->values);
    std::sort(keys.begin(), keys.end());
    for (size_t i = 0; i < keys.size(); ++i) idx[i] = keys[i].second;
  } else {
    const size_t rows = map.layers().size();
    // Expert index first, then layer: every layer gets expert 0, then expert 1, ...
    std::sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) {
      const uint64_t ka = (a % e) * rows + a / e;
      const uint64_t kb = (b % e) * rows + b / e;
      return ka < kb;
    });
  }
  uint64_t left = budget;
  for (uint32_t i : idx) {
    const uint64_t bytes = device[i];
    if (bytes <= left) {
      left -= bytes;
      map.set_row(i / e, i % e, Device::kGpu);
    }
  }
}

}  // namespace

DeviceMap::DeviceMap(std::vector<uint32_t> layers, uint64_t n_experts)
    : layers_(std::move(layers)),
      n_experts_(n_experts),
      map_(layers_.size() * n_experts, Device::kCpu) {}

Device DeviceMap::at(uint64_t layer, uint64_t expert) const {
  if (expert >= n_experts_) return Device::kCpu;
  auto it = std::lower_bound(layers_.begin(), layers_.end(), layer);
  if (it == layers_.end() || *it != layer) return Device::kCpu;
  return at_row(static_cast<size_t>(it - layers_.begin()), expert);
}

uint64_t DeviceMap::n_gpu() const {
  return static_cast<uint64_t>(std::count(map_.begin(), map_.end(), Device::kGpu));
}

std::vector<std::pair<uint32_t, uint32_t>> DeviceMap::gpu_experts() const {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (size_t i = 0; i < map_.size(); ++i) {
    if (map_[i] == Device::kGpu) {
      out.emplace_back(layers_[i / n_experts_], static_cast<uint32_t>(i % n_experts_));
    }
  }
  return out;
}

Result<Placement> plan_placement(const PlanRequest& request, const std::vector<uint32_t>& layers,
                                 uint64_t n_experts, const ExpertTable* stats,
                                 const ExpertSizes* sizes) {
  if (layers.empty() || n_experts == 0) {
    return invalid_argument_error("nothing to place: no MoE layers or no experts");
  }
  if (layers.size() > model::kMaxLayers || n_experts > model::kMaxExperts) {
    return invalid_argument_error("the model is larger than any supported one");
  }
  for (size_t r = 1; r < layers.size(); ++r) {
    if (layers[r] <= layers[r - 1]) {
      return invalid_argument_error("MoE layer indices must be strictly ascending");
    }
  }
  if (stats != nullptr) {
    TANDEM_RETURN_IF_ERROR(
        check_shape("the statistics", layers, n_experts, stats->layers, stats->n_experts));
    TANDEM_RETURN_IF_ERROR(validate_table(*stats));
  }
  if (sizes != nullptr) {
    TANDEM_RETURN_IF_ERROR(
        check_shape("the expert sizes", layers, n_experts, sizes->layers, sizes->n_experts));
    if (sizes->bytes.size() != layers.size() * n_experts ||
        sizes->device_bytes.size() != sizes->bytes.size()) {
      return invalid_argument_error("the expert sizes table has the wrong number of entries");
    }
  }

  Placement p;
  p.map = DeviceMap(layers, n_experts);
  p.requested = request.policy;
  p.used = request.policy;
  const uint64_t total = layers.size() * n_experts;
  switch (request.policy) {
    case PlacementPolicy::kFrequency:
      p.k = clamp_k(request.num_gpu_experts, total);
      if (stats == nullptr) {
        p.used = PlacementPolicy::kUniform;
        p.fell_back_to_uniform = true;
        warn(p, "policy frequency has no activation statistics; falling back to uniform (" +
                    std::to_string(p.k) + " experts spread evenly over " +
                    std::to_string(layers.size()) + " MoE layers, by expert index)");
        plan_uniform(nullptr, p.k, p.map);
      } else {
        plan_frequency(*stats, p.k, p.map);
      }
      break;
    case PlacementPolicy::kUniform:
      p.k = clamp_k(request.num_gpu_experts, total);
      plan_uniform(stats, p.k, p.map);
      break;
    case PlacementPolicy::kBudget: {
      if (sizes == nullptr) {
        return invalid_argument_error("policy budget needs the experts' byte sizes (a model)");
      }
      if (request.gpu_reserved_bytes > request.gpu_memory_budget) {
        warn(p, "the GPU must hold " + std::to_string(request.gpu_reserved_bytes) +
                    " bytes besides experts, more than the budget of " +
                    std::to_string(request.gpu_memory_budget) + "; no expert goes on the GPU");
      } else {
        p.expert_budget_bytes = request.gpu_memory_budget - request.gpu_reserved_bytes;
      }
      if (stats == nullptr) {
        p.fell_back_to_uniform = true;
        warn(p,
             "policy budget has no activation statistics; filling MoE layers evenly by expert "
             "index");
      }
      plan_budget(stats, *sizes, p.expert_budget_bytes, p.map);
      p.k = p.map.n_gpu();
      break;
    }
  }
  return p;
}

}  // namespace tandem::placement
