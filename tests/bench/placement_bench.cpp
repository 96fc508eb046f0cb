// Benchmark: planning a DeepSeek-V3-sized table (61 MoE layers x 256 experts) with each policy.
#include <benchmark/benchmark.h>

#include <random>

#include "engine/placement/planner.h"

namespace tandem::placement {
namespace {

constexpr uint32_t kLayers = 61;
constexpr uint64_t kExperts = 256;

// Random counts with many ties (as real counts of short profiles have), fixed seed.
ExpertTable deepseek_table() {
  ExpertTable t;
  t.n_experts = kExperts;
  for (uint32_t l = 0; l < kLayers; ++l) t.layers.push_back(l);
  std::mt19937_64 rng(42);
  std::geometric_distribution<int> counts(0.001);
  for (uint64_t i = 0; i < kLayers * kExperts; ++i) t.values.push_back(counts(rng));
  return t;
}

void run(benchmark::State& state, PlacementPolicy policy) {
  const ExpertTable t = deepseek_table();
  ExpertSizes sizes;
  sizes.layers = t.layers;
  sizes.n_experts = kExperts;
  sizes.bytes.assign(t.values.size(), 44u << 20);  // ~44 MiB: one Q8_0 DeepSeek-V3 expert
  sizes.device_bytes = sizes.bytes;
  PlanRequest req;
  req.policy = policy;
  req.num_gpu_experts = state.range(0);
  req.gpu_memory_budget = static_cast<uint64_t>(state.range(0)) * (44u << 20);
  for (auto _ : state) {
    Result<Placement> p = plan_placement(req, t.layers, kExperts, &t, &sizes);
    benchmark::DoNotOptimize(p);
  }
}

void BM_PlanFrequency(benchmark::State& s) {
  run(s, PlacementPolicy::kFrequency);
}
void BM_PlanUniform(benchmark::State& s) {
  run(s, PlacementPolicy::kUniform);
}
void BM_PlanBudget(benchmark::State& s) {
  run(s, PlacementPolicy::kBudget);
}

// KTransformers' test_performance k values.
BENCHMARK(BM_PlanFrequency)
    ->Arg(0)
    ->Arg(100)
    ->Arg(1000)
    ->Arg(5000)
    ->Arg(15616)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlanUniform)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlanBudget)->Arg(1000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tandem::placement

BENCHMARK_MAIN();
