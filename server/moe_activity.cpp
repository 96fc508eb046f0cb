// MoeActivity: live activation counts and per-request GPU/CPU expert counters.
#include "server/moe_activity.h"

#include <algorithm>
#include <string>

namespace tandem::server {

MoeCounters& MoeCounters::operator+=(const MoeCounters& o) {
  token_layers_gpu_only += o.token_layers_gpu_only;
  token_layers_cpu_only += o.token_layers_cpu_only;
  token_layers_split += o.token_layers_split;
  expert_pairs_gpu += o.expert_pairs_gpu;
  expert_pairs_cpu += o.expert_pairs_cpu;
  return *this;
}

Result<std::unique_ptr<MoeActivity>> MoeActivity::create(
    const placement::ModelIdentity& model, std::optional<placement::ActivationStats> loaded,
    const placement::DeviceMap& map, size_t max_finished) {
  TANDEM_ASSIGN_OR_RETURN(placement::ActivationStats empty,
                          placement::ActivationStats::create(model));
  if (loaded.has_value()) {
    const Status same = placement::check_same_model(loaded->model(), model);
    if (!same.ok()) return same.with_prefix("loaded activation statistics");
  }
  std::vector<int32_t> row_of_layer(model.n_layers, -1);
  std::vector<uint8_t> on_gpu;
  if (!map.layers().empty()) {
    if (map.n_experts() != model.n_experts) {
      return invalid_argument_error("placement has " + std::to_string(map.n_experts()) +
                                    " experts per layer, the model " +
                                    std::to_string(model.n_experts));
    }
    on_gpu.assign(map.layers().size() * model.n_experts, 0);
    for (size_t row = 0; row < map.layers().size(); ++row) {
      const uint32_t layer = map.layers()[row];
      if (layer >= model.n_layers || !model.moe_layers[layer]) {
        return invalid_argument_error("placement lists layer " + std::to_string(layer) +
                                      ", which is not a MoE layer of the model");
      }
      row_of_layer[layer] = static_cast<int32_t>(row);
      for (uint64_t e = 0; e < model.n_experts; ++e) {
        on_gpu[row * model.n_experts + e] = map.at_row(row, e) == placement::Device::kGpu ? 1 : 0;
      }
    }
  }
  return std::unique_ptr<MoeActivity>(new MoeActivity(std::move(empty), std::move(loaded),
                                                      std::move(row_of_layer), std::move(on_gpu),
                                                      model.n_experts, max_finished));
}

MoeActivity::MoeActivity(placement::ActivationStats empty,
                         std::optional<placement::ActivationStats> loaded,
                         std::vector<int32_t> map_row_of_layer, std::vector<uint8_t> on_gpu,
                         uint64_t n_experts, size_t max_finished)
    : model_(empty.model()),
      loaded_(std::move(loaded)),
      live_(empty),
      map_row_of_layer_(std::move(map_row_of_layer)),
      on_gpu_(std::move(on_gpu)),
      n_experts_(n_experts),
      recorder_(empty),
      max_finished_(max_finished) {}

bool MoeActivity::expert_on_gpu(int32_t map_row, int32_t expert) const {
  if (map_row < 0) return false;
  return on_gpu_[static_cast<size_t>(map_row) * n_experts_ + static_cast<size_t>(expert)] != 0;
}

void MoeActivity::on_forward(std::span<const experts::Routing> routing,
                             std::span<const runtime::RoutedToken> tokens) {
  // Rows of one request phase are contiguous in a batch; one segment per run.
  segments_.clear();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const runtime::RoutedToken& t = tokens[i];
    if (!segments_.empty() && segments_.back().request_id == t.request_id &&
        segments_.back().prefill == t.prefill) {
      segments_.back().end = i + 1;
    } else {
      segments_.push_back(Segment{t.request_id, t.prefill, i, i + 1, MoeCounters{}});
    }
  }

  uint64_t gpu_total = 0;
  uint64_t cpu_total = 0;
  const uint64_t n_layers = std::min<uint64_t>(routing.size(), map_row_of_layer_.size());
  for (uint64_t layer = 0; layer < n_layers; ++layer) {
    const experts::Routing& r = routing[layer];
    if (r.n_tokens == 0 || r.k == 0 || !model_.moe_layers[layer]) continue;
    const size_t rows = std::min(r.n_tokens, tokens.size());
    const size_t pairs = std::min(rows * r.k, r.experts.size());
    recorder_.record(layer, std::span<const int32_t>(r.experts).first(pairs));
    const int32_t map_row = map_row_of_layer_[layer];
    for (Segment& seg : segments_) {
      const size_t end = std::min(seg.end, rows);
      for (size_t row = seg.begin; row < end; ++row) {
        uint64_t gpu = 0;
        uint64_t cpu = 0;
        for (size_t slot = 0; slot < r.k && row * r.k + slot < pairs; ++slot) {
          const int32_t e = r.experts[row * r.k + slot];
          if (e < 0 || static_cast<uint64_t>(e) >= n_experts_) continue;  // padding
          if (expert_on_gpu(map_row, e)) {
            ++gpu;
          } else {
            ++cpu;
          }
        }
        seg.counters.expert_pairs_gpu += gpu;
        seg.counters.expert_pairs_cpu += cpu;
        if (gpu > 0 && cpu > 0) {
          ++seg.counters.token_layers_split;
        } else if (gpu > 0) {
          ++seg.counters.token_layers_gpu_only;
        } else if (cpu > 0) {
          ++seg.counters.token_layers_cpu_only;
        }
        gpu_total += gpu;
        cpu_total += cpu;
      }
    }
  }
  recorder_.add_tokens(tokens.size());
  live_.fold(recorder_);
  pairs_gpu_.fetch_add(gpu_total, std::memory_order_relaxed);
  pairs_cpu_.fetch_add(cpu_total, std::memory_order_relaxed);

  std::lock_guard<std::mutex> lock(mu_);
  for (const Segment& seg : segments_) {
    if (seg.request_id == nullptr) continue;
    auto it = requests_.find(*seg.request_id);
    if (it == requests_.end()) {
      // Routed before on_started (not expected from the scheduler): track it as running.
      it = requests_.emplace(*seg.request_id, Entry{{}, next_generation_++}).first;
    }
    RequestMoeSnapshot& c = it->second.counters;
    const uint64_t n = seg.end - seg.begin;
    if (seg.prefill) {
      c.prompt_tokens += n;
      c.prefill += seg.counters;
    } else {
      c.generated_tokens += n;
      c.decode += seg.counters;
    }
  }
}

void MoeActivity::on_expert_seconds(std::span<const double> seconds_per_worker) {
  // Bounds each entry so that the sums stay far below 2^64 ns; a pass never takes 30 years.
  constexpr double kMaxSeconds = 1e9;
  double cpu = 0.0;
  double gpu = 0.0;
  for (size_t w = 0; w < seconds_per_worker.size(); ++w) {
    const double s = seconds_per_worker[w];
    if (!(s >= 0.0 && s < kMaxSeconds)) continue;  // negative, NaN, infinite or absurd
    (w == 0 ? cpu : gpu) += s;
  }
  if (gpu >= kMaxSeconds) gpu = 0.0;  // several GPU workers' entries may pass it together
  nanoseconds_cpu_.fetch_add(static_cast<uint64_t>(cpu * 1e9 + 0.5), std::memory_order_relaxed);
  nanoseconds_gpu_.fetch_add(static_cast<uint64_t>(gpu * 1e9 + 0.5), std::memory_order_relaxed);
}

void MoeActivity::on_started(const std::string& request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = requests_.find(request_id);
  if (it != requests_.end()) {
    if (it->second.counters.state == RequestActivityState::kFinished) --finished_count_;
    // A reused id: its stale finished_order_ entry no longer matches the generation.
    it->second = Entry{{}, next_generation_++};
    return;
  }
  requests_.emplace(request_id, Entry{{}, next_generation_++});
}

void MoeActivity::on_finished(const std::string& request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = requests_.find(request_id);
  if (it == requests_.end() || it->second.counters.state == RequestActivityState::kFinished) {
    return;
  }
  it->second.counters.state = RequestActivityState::kFinished;
  ++finished_count_;
  finished_order_.emplace_back(request_id, it->second.generation);
  evict_finished_locked();
}

void MoeActivity::evict_finished_locked() {
  while (finished_count_ > max_finished_ && !finished_order_.empty()) {
    const auto [id, generation] = std::move(finished_order_.front());
    finished_order_.pop_front();
    auto it = requests_.find(id);
    if (it != requests_.end() && it->second.generation == generation &&
        it->second.counters.state == RequestActivityState::kFinished) {
      requests_.erase(it);
      --finished_count_;
    }
  }
  // Stale entries (ids restarted after finishing) must not pile up.
  if (finished_order_.size() > 2 * max_finished_ + 64) {
    std::erase_if(finished_order_, [this](const std::pair<std::string, uint64_t>& f) {
      auto it = requests_.find(f.first);
      return it == requests_.end() || it->second.generation != f.second;
    });
  }
}

placement::ActivationStats MoeActivity::live() const {
  return live_.snapshot();
}

Result<placement::ActivationStats> MoeActivity::merged() const {
  placement::ActivationStats live_now = live_.snapshot();
  if (!loaded_.has_value()) return live_now;
  placement::ActivationStats sum = *loaded_;
  TANDEM_RETURN_IF_ERROR(sum.merge(live_now));
  return sum;
}

std::optional<RequestMoeSnapshot> MoeActivity::request(const std::string& request_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return std::nullopt;
  return it->second.counters;
}

size_t MoeActivity::tracked_requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_.size();
}

uint64_t MoeActivity::expert_pairs(bool gpu) const {
  return (gpu ? pairs_gpu_ : pairs_cpu_).load(std::memory_order_relaxed);
}

uint64_t MoeActivity::expert_nanoseconds(bool gpu) const {
  return (gpu ? nanoseconds_gpu_ : nanoseconds_cpu_).load(std::memory_order_relaxed);
}

}  // namespace tandem::server
