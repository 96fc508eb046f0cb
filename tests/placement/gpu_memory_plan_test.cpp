// Tests of the GPU memory plan: demand totals, experts_that_fit, and the refusal message.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "base/byte_text.h"
#include "engine/placement/gpu_memory_plan.h"

namespace tandem::placement {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

// Layers {1, 3} (model indices) with 4 experts each; layer 1's experts are 10 MiB, layer 3's
// 10 MiB except expert 2 (30 MiB).
ExpertSizes sizes() {
  ExpertSizes s;
  s.layers = {1, 3};
  s.n_experts = 4;
  s.bytes = {10 * kMiB, 10 * kMiB, 10 * kMiB, 10 * kMiB,
             10 * kMiB, 10 * kMiB, 30 * kMiB, 10 * kMiB};
  s.device_bytes = s.bytes;
  return s;
}

DeviceMap map_with(const std::vector<std::pair<size_t, uint64_t>>& gpu) {
  DeviceMap m({1, 3}, 4);
  for (const auto& [row, expert] : gpu) m.set_row(row, expert, Device::kGpu);
  return m;
}

TEST_CASE("format_bytes uses binary units with one decimal", "[placement][gpu_memory]") {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(1536) == "1.5 KiB");
  CHECK(format_bytes(3 * kGiB) == "3.0 GiB");
  CHECK(format_bytes(std::numeric_limits<uint64_t>::max()) == "16.0 EiB");
}

TEST_CASE("demand totals saturate and leave experts out of fixed()", "[placement][gpu_memory]") {
  GpuMemoryDemand d;
  d.experts = 100;
  d.expert_scratch = 1;
  d.dense = 20;
  d.kv = 300;
  d.dense_scratch = 4;
  CHECK(d.fixed() == 325);
  CHECK(d.total() == 425);
  d.kv = std::numeric_limits<uint64_t>::max() - 10;
  CHECK(d.total() == std::numeric_limits<uint64_t>::max());
}

TEST_CASE("gpu_expert_bytes sums the placed experts' own sizes", "[placement][gpu_memory]") {
  const ExpertSizes s = sizes();
  CHECK(gpu_expert_bytes(map_with({}), s) == 0);
  CHECK(gpu_expert_bytes(map_with({{0, 0}, {1, 2}}), s) == 40 * kMiB);
  CHECK(gpu_expert_bytes(map_with({{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 0}, {1, 1}, {1, 2}, {1, 3}}),
                         s) == 100 * kMiB);
}

TEST_CASE("experts_that_fit takes the smallest first", "[placement][gpu_memory]") {
  const ExpertSizes s = sizes();
  const DeviceMap all = map_with({{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 0}, {1, 1}, {1, 2}, {1, 3}});
  CHECK(experts_that_fit(all, s, 0) == 0);
  CHECK(experts_that_fit(all, s, 10 * kMiB - 1) == 0);
  CHECK(experts_that_fit(all, s, 10 * kMiB) == 1);
  CHECK(experts_that_fit(all, s, 69 * kMiB) == 6);
  CHECK(experts_that_fit(all, s, 70 * kMiB) == 7);  // the seven 10 MiB experts
  CHECK(experts_that_fit(all, s, 99 * kMiB) == 7);  // the 30 MiB one does not fit beside them
  CHECK(experts_that_fit(all, s, 100 * kMiB) == 8);
  CHECK(experts_that_fit(all, s, std::numeric_limits<uint64_t>::max()) == 8);
}

TEST_CASE("usable memory is free minus headroom, capped by the budget", "[placement][gpu_memory]") {
  GpuOffer offer;
  offer.free_bytes = 100 * kGiB;
  offer.headroom = default_gpu_headroom(offer.free_bytes);
  CHECK(offer.headroom == 100 * kGiB / 50);
  CHECK(offer.usable() == 100 * kGiB - 100 * kGiB / 50);
  offer.budget = 2 * kGiB;
  CHECK(offer.usable() == 2 * kGiB);
  offer.free_bytes = 100 * kMiB;
  offer.headroom = default_gpu_headroom(offer.free_bytes);
  CHECK(offer.headroom == 256 * kMiB);
  CHECK(offer.usable() == 0);
}

TEST_CASE("check_gpu_memory accepts a fitting demand and names the experts that fit otherwise",
          "[placement][gpu_memory]") {
  const ExpertSizes s = sizes();
  const DeviceMap all = map_with({{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 0}, {1, 1}, {1, 2}, {1, 3}});
  GpuMemoryDemand d;
  d.experts = gpu_expert_bytes(all, s);
  d.n_experts = 8;
  d.expert_scratch = 5 * kMiB;
  d.dense = 20 * kMiB;
  d.kv = 15 * kMiB;
  GpuOffer offer;
  offer.device = "device 0 (Test GPU)";
  offer.free_bytes = 200 * kMiB;
  offer.headroom = 0;
  CHECK(check_gpu_memory(d, offer, all, s).ok());  // 140 MiB of 200

  offer.budget = 100 * kMiB;  // 40 MiB fixed leaves 60: six 10 MiB experts
  const Status st = check_gpu_memory(d, offer, all, s);
  REQUIRE(st.code() == StatusCode::kResourceExhausted);
  const std::string& m = st.message();
  CHECK(m.find("device 0 (Test GPU)") != std::string::npos);
  CHECK(m.find("experts 100.0 MiB (8)") != std::string::npos);
  CHECK(m.find("KV cache 15.0 MiB") != std::string::npos);
  CHECK(m.find("= 140.0 MiB") != std::string::npos);
  CHECK(m.find("offers 100.0 MiB") != std::string::npos);
  CHECK(m.find("placement.gpu_memory_budget 100.0 MiB") != std::string::npos);
  CHECK(m.find("At most 6 of the 8 GPU experts fit") != std::string::npos);
  CHECK(m.find("placement.num_gpu_experts to 6") != std::string::npos);

  offer.budget = 30 * kMiB;  // below the fixed 40 MiB
  const Status none = check_gpu_memory(d, offer, all, s);
  REQUIRE(none.code() == StatusCode::kResourceExhausted);
  CHECK(none.message().find("Even with no GPU experts the rest (40.0 MiB) does not fit") !=
        std::string::npos);
  CHECK(none.message().find("runtime.dense_device: cpu") != std::string::npos);
}

TEST_CASE("format_gpu_demand leaves out zero parts", "[placement][gpu_memory]") {
  GpuMemoryDemand d;
  CHECK(format_gpu_demand(d) == "nothing");
  d.experts = 3 * kGiB;
  d.n_experts = 96;
  d.kv = kGiB;
  CHECK(format_gpu_demand(d) == "experts 3.0 GiB (96), KV cache 1.0 GiB = 4.0 GiB");
}

}  // namespace
}  // namespace tandem::placement
