// Benchmark: the CPU matmul kernel variants (scalar, AVX2, AVX-512, AVX-512 VNNI) on an expert's
// gate matrix (768 x 2048), one thread, for the int8 and float paths of every dense weight type.
// Reports GFLOP/s (2 * rows * cols * tokens per call); compare variants within one run.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_dispatch.h"

namespace tandem::kernels {
namespace {

constexpr size_t kRows = 768;
constexpr size_t kCols = 2048;

struct Case {
  TensorType type;
  MatmulActivations mode;
  const char* name;
};

// Random weight bytes of `type` (normal floats; Q8_0: random quants and small scales).
std::vector<uint8_t> random_bytes(TensorType type, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint8_t> bytes;
  const auto put16 = [&bytes](uint16_t v) {
    bytes.push_back(static_cast<uint8_t>(v));
    bytes.push_back(static_cast<uint8_t>(v >> 8));
  };
  const size_t n = kRows * kCols;
  for (size_t i = 0; i < n; ++i) {
    const float f = normal(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if (type == TensorType::kF32) {
      for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<uint8_t>(bits >> (8 * k)));
    } else if (type == TensorType::kF16) {
      put16(fp32_to_fp16_bits(f));
    } else if (type == TensorType::kBF16) {
      put16(static_cast<uint16_t>(bits >> 16));
    } else if (i % 32 == 0) {  // Q8_0: a block header, then this element's quant
      put16(fp32_to_fp16_bits(0.01f));
      bytes.push_back(static_cast<uint8_t>(static_cast<int8_t>(f * 40.0f)));
    } else {
      bytes.push_back(static_cast<uint8_t>(static_cast<int8_t>(f * 40.0f)));
    }
  }
  return bytes;
}

void run(benchmark::State& state, MatmulVariant variant, Case c) {
  const size_t n_tokens = static_cast<size_t>(state.range(0));
  std::mt19937 rng(1);
  const std::vector<uint8_t> bytes = random_bytes(c.type, rng);
  Result<WeightMatrix> w = make_weight_matrix(c.type, bytes, kRows, kCols);
  if (!w.ok()) {
    state.SkipWithError(w.status().message().c_str());
    return;
  }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n_tokens * kCols);
  for (float& f : x) f = normal(rng);
  std::vector<float> y(n_tokens * kRows);
  const MatmulVariant saved = active_matmul_variant();
  set_matmul_variant(variant);
  for (auto _ : state) {
    matmul(*w, x, n_tokens, y, c.mode);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_matmul_variant(saved);
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * kRows * kCols * static_cast<double>(n_tokens) *
                             static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}

void register_all() {
  const Case cases[] = {{TensorType::kQ8_0, MatmulActivations::kQuantized, "q8_0_int8"},
                        {TensorType::kQ8_0, MatmulActivations::kFloat, "q8_0_float"},
                        {TensorType::kF16, MatmulActivations::kFloat, "f16"},
                        {TensorType::kBF16, MatmulActivations::kFloat, "bf16"},
                        {TensorType::kF32, MatmulActivations::kFloat, "f32"}};
  for (const Case& c : cases) {
    for (MatmulVariant v : {MatmulVariant::kScalar, MatmulVariant::kAvx2, MatmulVariant::kAvx512,
                            MatmulVariant::kAvx512Vnni}) {
      if (!matmul_variant_supported(v)) continue;
      const std::string name =
          std::string("BM_Matmul/") + c.name + "/" + std::string(matmul_variant_name(v));
      benchmark::RegisterBenchmark(name.c_str(), run, v, c)
          ->ArgName("tokens")
          ->Arg(1)
          ->Arg(16)
          ->Arg(128)
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace
}  // namespace tandem::kernels

int main(int argc, char** argv) {
  tandem::kernels::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
