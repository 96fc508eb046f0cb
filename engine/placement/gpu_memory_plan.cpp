// GPU memory plan: demand totals, how many experts fit, and the refusal message.
#include "engine/placement/gpu_memory_plan.h"

#include <algorithm>
#include <limits>

#include "base/byte_text.h"

namespace tandem::placement {
namespace {

uint64_t add_sat(uint64_t a, uint64_t b) {
  return b > std::numeric_limits<uint64_t>::max() - a ? std::numeric_limits<uint64_t>::max()
                                                      : a + b;
}

uint64_t sub_sat(uint64_t a, uint64_t b) {
  return a > b ? a - b : 0;
}

// The device bytes of each GPU expert of `map` (0 outside `sizes`' shape).
std::vector<uint64_t> gpu_expert_sizes(const DeviceMap& map, const ExpertSizes& sizes) {
  std::vector<uint64_t> out;
  for (const auto& [layer, expert] : map.gpu_experts()) {
    const auto it = std::find(sizes.layers.begin(), sizes.layers.end(), layer);
    if (it == sizes.layers.end() || expert >= sizes.n_experts) {
      out.push_back(0);
      continue;
    }
    out.push_back(sizes.device_at(static_cast<size_t>(it - sizes.layers.begin()), expert));
  }
  return out;
}

}  // namespace

uint64_t GpuMemoryDemand::fixed() const {
  uint64_t total = 0;
  for (uint64_t b : {expert_scratch, dense, kv, dense_scratch}) total = add_sat(total, b);
  return total;
}

uint64_t GpuMemoryDemand::total() const {
  return add_sat(fixed(), experts);
}

uint64_t gpu_expert_bytes(const DeviceMap& map, const ExpertSizes& sizes) {
  uint64_t total = 0;
  for (uint64_t b : gpu_expert_sizes(map, sizes)) total = add_sat(total, b);
  return total;
}

uint64_t experts_that_fit(const DeviceMap& map, const ExpertSizes& sizes, uint64_t room) {
  std::vector<uint64_t> each = gpu_expert_sizes(map, sizes);
  std::sort(each.begin(), each.end());
  uint64_t used = 0;
  uint64_t n = 0;
  for (uint64_t b : each) {
    if (b > room - used) break;
    used += b;
    ++n;
  }
  return n;
}

uint64_t GpuOffer::usable() const {
  const uint64_t free_usable = sub_sat(free_bytes, headroom);
  return budget != 0 ? std::min(free_usable, budget) : free_usable;
}

uint64_t default_gpu_headroom(uint64_t free_bytes) {
  return std::max<uint64_t>(free_bytes / 50, uint64_t{256} << 20);
}

std::string format_gpu_demand(const GpuMemoryDemand& d) {
  std::string out;
  auto part = [&](const char* name, uint64_t bytes, std::string extra = "") {
    if (bytes == 0) return;
    if (!out.empty()) out += ", ";
    out += std::string(name) + " " + format_bytes(bytes) + extra;
  };
  part("experts", d.experts, " (" + std::to_string(d.n_experts) + ")");
  part("expert scratch", d.expert_scratch);
  part("dense weights", d.dense);
  part("KV cache", d.kv);
  part("dense scratch", d.dense_scratch);
  if (out.empty()) return "nothing";
  return out + " = " + format_bytes(d.total());
}

Status check_gpu_memory(const GpuMemoryDemand& demand, const GpuOffer& offer, const DeviceMap& map,
                        const ExpertSizes& sizes) {
  const uint64_t usable = offer.usable();
  if (demand.total() <= usable) return Status();
  std::string msg =
      "GPU memory: the placement needs " + format_gpu_demand(demand) + " on " + offer.device +
      ", which offers " + format_bytes(usable) + " (" + format_bytes(offer.free_bytes) + " free, " +
      format_bytes(offer.headroom) + " kept as headroom" +
      (offer.budget != 0 ? ", placement.gpu_memory_budget " + format_bytes(offer.budget)
                         : std::string()) +
      "). ";
  if (demand.fixed() > usable) {
    msg += "Even with no GPU experts the rest (" + format_bytes(demand.fixed()) +
           ") does not fit: lower runtime.kv_cache_bytes or runtime.max_batch_tokens, or set "
           "runtime.dense_device: cpu";
  } else {
    const uint64_t fit = experts_that_fit(map, sizes, usable - demand.fixed());
    msg += "At most " + std::to_string(fit) + " of the " + std::to_string(demand.n_experts) +
           " GPU experts fit: set placement.num_gpu_experts to " + std::to_string(fit) +
           " or less, or use placement.policy: budget";
  }
  return resource_exhausted_error(msg);
}

}  // namespace tandem::placement
