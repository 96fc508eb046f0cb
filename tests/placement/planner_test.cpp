// Tests of plan_placement: KTransformers' generate_gpu_experts_masks cases, ties, uniform, budget.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/placement/placement_report.h"
#include "engine/placement/planner.h"

namespace tandem::placement {
namespace {

using Pairs = std::vector<std::pair<uint32_t, uint32_t>>;

ExpertTable table(std::vector<std::vector<double>> rows) {
  ExpertTable t;
  t.n_experts = rows.at(0).size();
  for (size_t r = 0; r < rows.size(); ++r) {
    t.layers.push_back(static_cast<uint32_t>(r));
    t.values.insert(t.values.end(), rows[r].begin(), rows[r].end());
  }
  return t;
}

Placement plan(PlacementPolicy policy, int64_t k, const ExpertTable* stats,
               const std::vector<uint32_t>& layers, uint64_t n_experts) {
  PlanRequest req;
  req.policy = policy;
  req.num_gpu_experts = k;
  Result<Placement> p = plan_placement(req, layers, n_experts, stats, nullptr);
  REQUIRE(p.ok());
  return std::move(p).value();
}

Pairs frequency(const ExpertTable& t, int64_t k) {
  return plan(PlacementPolicy::kFrequency, k, &t, t.layers, t.n_experts).map.gpu_experts();
}

// The example of kt-kernel/test/test_generate_gpu_experts_masks.py (test_basic, test_edge_cases).
const ExpertTable kKtExample = table({{0.1, 0.5, 0.3, 0.8}, {0.2, 0.4, 0.9, 0.1}});

TEST_CASE("frequency: KTransformers' example with k = 3 picks 0.9, 0.8 and 0.5", "[placement]") {
  CHECK(frequency(kKtExample, 3) == Pairs{{0, 1}, {0, 3}, {1, 2}});
}

TEST_CASE("frequency: k is clamped to [0, layers x experts]", "[placement]") {
  CHECK(frequency(kKtExample, 0).empty());
  CHECK(frequency(kKtExample, -5).empty());
  CHECK(frequency(kKtExample, 8).size() == 8);
  CHECK(frequency(kKtExample, 100).size() == 8);
  const Placement p = plan(PlacementPolicy::kFrequency, 100, &kKtExample, {0, 1}, 4);
  CHECK(p.k == 8);
  CHECK(p.map.n_gpu() == 8);
  CHECK_FALSE(p.fell_back_to_uniform);
}

TEST_CASE("frequency: the budget is global, a layer may get all or none", "[placement]") {
  const ExpertTable t = table({{1, 2, 3}, {10, 20, 30}, {0, 0, 5}});
  CHECK(frequency(t, 3) == Pairs{{1, 0}, {1, 1}, {1, 2}});
  CHECK(frequency(t, 4) == Pairs{{1, 0}, {1, 1}, {1, 2}, {2, 2}});
}

TEST_CASE("frequency: ties go to the lower layer, then the lower expert", "[placement]") {
  const ExpertTable t = table({{1, 5, 5, 0}, {5, 5, 1, 0}});
  CHECK(frequency(t, 1) == Pairs{{0, 1}});
  CHECK(frequency(t, 2) == Pairs{{0, 1}, {0, 2}});
  CHECK(frequency(t, 3) == Pairs{{0, 1}, {0, 2}, {1, 0}});
  CHECK(frequency(t, 5) == Pairs{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}});
  // All equal: the first k in (layer, expert) order.
  const ExpertTable flat = table({{1, 1, 1}, {1, 1, 1}});
  CHECK(frequency(flat, 4) == Pairs{{0, 0}, {0, 1}, {0, 2}, {1, 0}});
}

TEST_CASE("frequency: rows keep their model layer indices", "[placement]") {
  ExpertTable t = table({{0, 9}, {9, 0}});
  t.layers = {3, 7};  // e.g. layers 0-2 dense
  const Placement p = plan(PlacementPolicy::kFrequency, 2, &t, t.layers, 2);
  CHECK(p.map.gpu_experts() == Pairs{{3, 1}, {7, 0}});
  CHECK(p.map.at(3, 1) == Device::kGpu);
  CHECK(p.map.at(3, 0) == Device::kCpu);
  CHECK(p.map.at(0, 0) == Device::kCpu);  // dense layer
  CHECK(p.map.at(7, 5) == Device::kCpu);  // no such expert
}

TEST_CASE("placement is identical across runs and matches a full sort", "[placement]") {
  std::mt19937_64 rng(20240601);
  std::uniform_int_distribution<int> small(0, 6);  // many ties
  ExpertTable t;
  t.n_experts = 128;
  for (uint32_t l = 0; l < 20; ++l) t.layers.push_back(l);
  for (size_t i = 0; i < 20 * 128; ++i) t.values.push_back(small(rng));
  for (int64_t k : {1, 100, 777, 2559}) {
    const Pairs a = frequency(t, k);
    const Pairs b = frequency(t, k);
    CHECK(a == b);
    REQUIRE(a.size() == static_cast<size_t>(k));
    // Reference: every entry sorted by (count desc, layer asc, expert asc), first k, re-sorted.
    std::vector<std::tuple<double, uint32_t, uint32_t>> all;
    for (uint32_t l = 0; l < 20; ++l) {
      for (uint32_t e = 0; e < 128; ++e) all.emplace_back(-t.at(l, e), l, e);
    }
    std::sort(all.begin(), all.end());
    Pairs expected;
    for (int64_t i = 0; i < k; ++i) expected.emplace_back(std::get<1>(all[i]), std::get<2>(all[i]));
    std::sort(expected.begin(), expected.end());
    CHECK(a == expected);
  }
}

TEST_CASE("frequency without statistics falls back to uniform with a warning", "[placement]") {
  const Placement p = plan(PlacementPolicy::kFrequency, 5, nullptr, {0, 1}, 4);
  CHECK(p.fell_back_to_uniform);
  CHECK(p.used == PlacementPolicy::kUniform);
  REQUIRE(p.warnings.size() == 1);
  CHECK_THAT(p.warnings[0], Catch::Contains("falling back to uniform"));
  CHECK(p.map.gpu_experts() == Pairs{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}});
}

TEST_CASE("uniform: k / layers each, the remainder to the earliest layers", "[placement]") {
  // KTransformers' uniform without statistics: masks[l, :n] by expert index.
  const Placement p = plan(PlacementPolicy::kUniform, 7, nullptr, {0, 1, 2}, 4);
  CHECK(p.map.gpu_experts() == Pairs{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {2, 0}, {2, 1}});
  CHECK_FALSE(p.fell_back_to_uniform);
  // With statistics: the most frequent inside each layer, ties by expert.
  const ExpertTable t = table({{0, 3, 3, 9}, {4, 0, 0, 1}, {1, 1, 1, 1}});
  const Placement q = plan(PlacementPolicy::kUniform, 7, &t, t.layers, 4);
  CHECK(q.map.gpu_experts() == Pairs{{0, 1}, {0, 2}, {0, 3}, {1, 0}, {1, 3}, {2, 0}, {2, 1}});
  CHECK(plan(PlacementPolicy::kUniform, -1, &t, t.layers, 4).map.n_gpu() == 0);
  CHECK(plan(PlacementPolicy::kUniform, 50, &t, t.layers, 4).map.n_gpu() == 12);
  CHECK(plan(PlacementPolicy::kUniform, 2, &t, t.layers, 4).map.gpu_experts() ==
        Pairs{{0, 3}, {1, 0}});
}

// Sizes per layer, as stored and on the device (the same unless per_layer_device is given).
ExpertSizes sizes_of(const std::vector<uint32_t>& layers, uint64_t n_experts,
                     const std::vector<uint64_t>& per_layer,
                     std::vector<uint64_t> per_layer_device = {}) {
  if (per_layer_device.empty()) per_layer_device = per_layer;
  ExpertSizes s;
  s.layers = layers;
  s.n_experts = n_experts;
  for (uint64_t b : per_layer) s.bytes.insert(s.bytes.end(), n_experts, b);
  for (uint64_t b : per_layer_device) s.device_bytes.insert(s.device_bytes.end(), n_experts, b);
  return s;
}

TEST_CASE("budget: the GPU budget counts device bytes, the CPU side stored bytes", "[placement]") {
  // Stored 100 B an expert, 128 B on the device (the worker's alignment): a 300-byte budget
  // holds two experts (256 B), not the three that stored sizes would admit.
  const ExpertTable t = table({{0.1, 0.5, 0.3, 0.8}});
  const ExpertSizes s = sizes_of({0}, 4, {100}, {128});
  PlanRequest req;
  req.policy = PlacementPolicy::kBudget;
  req.gpu_memory_budget = 300;
  Result<Placement> p = plan_placement(req, {0}, 4, &t, &s);
  REQUIRE(p.ok());
  CHECK(p->map.n_gpu() == 2);
  CHECK(p->map.at_row(0, 3) == Device::kGpu);
  CHECK(p->map.at_row(0, 1) == Device::kGpu);
  const PlacementReport r = make_report(*p, &t, &s);
  CHECK(r.gpu_expert_bytes == 256);
  CHECK(r.layers[0].gpu_bytes == 256);
  CHECK(r.cpu_expert_bytes == 200);
  // A table whose device sizes are missing is refused, not read past its end.
  ExpertSizes short_device = s;
  short_device.device_bytes.pop_back();
  CHECK(plan_placement(req, {0}, 4, &t, &short_device).status().code() ==
        StatusCode::kInvalidArgument);
}

TEST_CASE("budget: most frequent experts that fit, with per-layer expert sizes", "[placement]") {
  // Layer 0 experts are Q8_0-sized (100 B), layer 1 F16-sized (190 B).
  const ExpertTable t = table({{0.1, 0.5, 0.3, 0.8}, {0.2, 0.4, 0.9, 0.1}});
  const ExpertSizes s = sizes_of({0, 1}, 4, {100, 190});
  PlanRequest req;
  req.policy = PlacementPolicy::kBudget;
  req.gpu_reserved_bytes = 1000;
  SECTION("exact fit of the top three") {
    req.gpu_memory_budget = 1000 + 190 + 100 + 100;
    Result<Placement> p = plan_placement(req, t.layers, 4, &t, &s);
    REQUIRE(p.ok());
    CHECK(p->map.gpu_experts() == Pairs{{0, 1}, {0, 3}, {1, 2}});
    CHECK(p->expert_budget_bytes == 390);
    const PlacementReport r = make_report(*p, &t, &s);
    CHECK(r.gpu_expert_bytes == 390);
    CHECK(r.cpu_expert_bytes == 2 * 100 + 3 * 190);
    REQUIRE(r.layers.size() == 2);
    CHECK(r.layers[0].gpu_bytes == 200);
    CHECK(r.layers[1].gpu_bytes == 190);
  }
  SECTION("a too-large expert is skipped and smaller later ones still fit") {
    req.gpu_memory_budget = 1000 + 150;  // 0.9 (190 B) does not fit, 0.8 (100 B) does
    Result<Placement> p = plan_placement(req, t.layers, 4, &t, &s);
    REQUIRE(p.ok());
    CHECK(p->map.gpu_experts() == Pairs{{0, 3}});
  }
  SECTION("reservation above the budget: nothing, with a warning") {
    req.gpu_memory_budget = 999;
    Result<Placement> p = plan_placement(req, t.layers, 4, &t, &s);
    REQUIRE(p.ok());
    CHECK(p->map.n_gpu() == 0);
    CHECK(p->warnings.size() == 1);
  }
  SECTION("enough for everything") {
    req.gpu_memory_budget = 1u << 20;
    Result<Placement> p = plan_placement(req, t.layers, 4, &t, &s);
    REQUIRE(p.ok());
    CHECK(p->map.n_gpu() == 8);
  }
  SECTION("without statistics layers fill evenly by expert index") {
    req.gpu_memory_budget = 1000 + 100 + 190 + 100;
    Result<Placement> p = plan_placement(req, t.layers, 4, nullptr, &s);
    REQUIRE(p.ok());
    CHECK(p->fell_back_to_uniform);
    CHECK(p->map.gpu_experts() == Pairs{{0, 0}, {0, 1}, {1, 0}});
  }
  SECTION("without sizes it is refused") {
    req.gpu_memory_budget = 5000;
    CHECK(plan_placement(req, t.layers, 4, &t, nullptr).status().code() ==
          StatusCode::kInvalidArgument);
  }
}

TEST_CASE("budget with equal expert sizes takes the same set as first fit over a full sort",
          "[placement]") {
  // Equal sizes take the selection shortcut; the reference walks the full sort (ties: count
  // descending, layer ascending, expert ascending) and takes every expert that still fits.
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> small(0, 5);  // many ties
  ExpertTable t;
  t.n_experts = 64;
  for (uint32_t l = 0; l < 12; ++l) t.layers.push_back(l);
  for (size_t i = 0; i < 12 * 64; ++i) t.values.push_back(small(rng));
  const ExpertSizes s = sizes_of(t.layers, 64, std::vector<uint64_t>(12, 1000));
  std::vector<std::tuple<double, uint32_t, uint32_t>> all;
  for (uint32_t l = 0; l < 12; ++l) {
    for (uint32_t e = 0; e < 64; ++e) all.emplace_back(-t.at(l, e), l, e);
  }
  std::sort(all.begin(), all.end());
  for (uint64_t budget : {0ull, 999ull, 1000ull, 123456ull, 767999ull, 768000ull, 10000000ull}) {
    PlanRequest req;
    req.policy = PlacementPolicy::kBudget;
    req.gpu_memory_budget = budget;
    Result<Placement> p = plan_placement(req, t.layers, 64, &t, &s);
    REQUIRE(p.ok());
    Pairs expected;
    uint64_t left = budget;
    for (const auto& [v, l, e] : all) {
      if (left >= 1000) {
        left -= 1000;
        expected.emplace_back(l, e);
      }
    }
    std::sort(expected.begin(), expected.end());
    INFO("budget " << budget);
    CHECK(p->map.gpu_experts() == expected);
  }
}

TEST_CASE("bad planner inputs are refused, never abort", "[placement]") {
  PlanRequest req;
  req.num_gpu_experts = 2;
  ExpertTable t = table({{1, 2}, {3, 4}});
  CHECK_FALSE(plan_placement(req, {}, 2, nullptr, nullptr).ok());
  CHECK_FALSE(plan_placement(req, {0, 1}, 0, nullptr, nullptr).ok());
  CHECK_FALSE(plan_placement(req, {1, 0}, 2, nullptr, nullptr).ok());
  CHECK_FALSE(plan_placement(req, {0, 1}, 3, &t, nullptr).ok());  // shape differs
  t.values[1] = -1;
  CHECK_THAT(plan_placement(req, {0, 1}, 2, &t, nullptr).status().message(),
             Catch::Contains("negative"));
  t.values[1] = std::numeric_limits<double>::quiet_NaN();
  CHECK_THAT(plan_placement(req, {0, 1}, 2, &t, nullptr).status().message(),
             Catch::Contains("not finite"));
}

TEST_CASE("report: coverage, per-layer lists, table and JSON", "[placement]") {
  const Placement p = plan(PlacementPolicy::kFrequency, 3, &kKtExample, {0, 1}, 4);
  const PlacementReport r = make_report(p, &kKtExample, nullptr);
  // (0.5 + 0.8 + 0.9) / 3.3
  REQUIRE(r.coverage.has_value());
  CHECK(*r.coverage == Approx(2.2 / 3.3));
  CHECK(r.n_gpu_experts == 3);
  CHECK(r.layers[0].gpu_experts == std::vector<uint32_t>{1, 3});
  CHECK(r.layers[1].gpu_experts == std::vector<uint32_t>{2});
  const nlohmann::json j = report_json(r);
  CHECK(j["gpu_experts"] == nlohmann::json::parse("[[0,1],[0,3],[1,2]]"));
  CHECK(j["layers"][0]["n_gpu_experts"] == 2);
  CHECK(j["gpu_expert_bytes"].is_null());
  const std::string text = format_report_table(r);
  CHECK_THAT(text, Catch::Contains("3 of 8 experts on the GPU"));
  CHECK_THAT(text, Catch::Contains("66.67%"));
  // No statistics: coverage unknown.
  const PlacementReport none = make_report(p, nullptr, nullptr);
  CHECK_FALSE(none.coverage.has_value());
  CHECK(report_json(none)["coverage"].is_null());
}

}  // namespace
}  // namespace tandem::placement
