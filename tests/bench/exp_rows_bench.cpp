// Benchmark: the exp row kernels (exp_rows.h), scalar, AVX2 and AVX-512, on one softmax row of 64,
// 512 and 4096 logits (attention rows of those context lengths), one silu_mul row of 768 (an
// expert's intermediate width) and one swiglu_oai row of 2880 (gpt-oss's), beside softmax and
// swiglu_oai with std::exp per element (softmax with a plain double sum). One thread, data in
// cache: this times the kernels. Compare within one run.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/exp_rows.h"

namespace tandem::kernels {
namespace {

std::vector<float> logits(size_t n) {
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

void softmax_std_exp(float* row, size_t n, const float*) {
  float max = row[0];
  for (size_t i = 0; i < n; ++i) max = std::fmax(max, row[i]);
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    row[i] = std::exp(row[i] - max);
    sum += row[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (size_t i = 0; i < n; ++i) row[i] *= inv;
}

using SoftmaxFn = void (*)(float*, size_t, const float*);

void BM_Softmax(benchmark::State& state, SoftmaxFn fn, bool runs) {
  if (!runs) {
    state.SkipWithError("this CPU lacks the variant's instructions");
    return;
  }
  const std::vector<float> x = logits(static_cast<size_t>(state.range(0)));
  std::vector<float> row(x.size());
  for (auto _ : state) {
    row = x;
    fn(row.data(), row.size(), nullptr);
    benchmark::DoNotOptimize(row.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

using SiluFn = void (*)(const float*, const float*, size_t, float*);

void BM_SiluMul(benchmark::State& state, SiluFn fn, bool runs) {
  if (!runs) {
    state.SkipWithError("this CPU lacks the variant's instructions");
    return;
  }
  const std::vector<float> gate = logits(768), up = logits(768);
  std::vector<float> out(768);
  for (auto _ : state) {
    fn(gate.data(), up.data(), out.size(), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * 768);
}

using SwiGluOaiFn = void (*)(const float*, const float*, size_t, float, float, float*);

// swiglu_oai as it was written before the exp row kernels took it: std::exp per element.
void swiglu_oai_std_exp(const float* gate, const float* up, size_t n, float alpha, float limit,
                        float* out) {
  for (size_t i = 0; i < n; ++i) {
    const float g = std::fmin(gate[i], limit);
    const float u = std::fmax(-limit, std::fmin(up[i], limit));
    out[i] = g / (1.0f + std::exp(alpha * -g)) * (u + 1.0f);
  }
}

void BM_SwiGluOai(benchmark::State& state, SwiGluOaiFn fn, bool runs) {
  if (!runs) {
    state.SkipWithError("this CPU lacks the variant's instructions");
    return;
  }
  constexpr size_t kWidth = 2880;
  const std::vector<float> gate = logits(kWidth), up = logits(kWidth);
  std::vector<float> out(kWidth);
  for (auto _ : state) {
    fn(gate.data(), up.data(), out.size(), 1.702f, 7.0f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kWidth));
}

const bool kAvx2 = cpu_features().avx2 && cpu_features().fma;
const bool kAvx512 = kAvx2 && cpu_features().avx512f;

BENCHMARK_CAPTURE(BM_Softmax, std_exp, softmax_std_exp, true)->Arg(64)->Arg(512)->Arg(4096);
BENCHMARK_CAPTURE(BM_Softmax, scalar, detail::softmax_scalar, true)->Arg(64)->Arg(512)->Arg(4096);
#if defined(__x86_64__)
BENCHMARK_CAPTURE(BM_Softmax, avx2, detail::softmax_avx2, kAvx2)->Arg(64)->Arg(512)->Arg(4096);
BENCHMARK_CAPTURE(BM_Softmax, avx512, detail::softmax_avx512, kAvx512)
    ->Arg(64)
    ->Arg(512)
    ->Arg(4096);
BENCHMARK_CAPTURE(BM_SiluMul, avx2, detail::silu_mul_avx2, kAvx2);
BENCHMARK_CAPTURE(BM_SiluMul, avx512, detail::silu_mul_avx512, kAvx512);
#endif
BENCHMARK_CAPTURE(BM_SiluMul, scalar, detail::silu_mul_scalar, true);
BENCHMARK_CAPTURE(BM_SwiGluOai, std_exp, swiglu_oai_std_exp, true);
BENCHMARK_CAPTURE(BM_SwiGluOai, scalar, detail::swiglu_oai_scalar, true);
#if defined(__x86_64__)
BENCHMARK_CAPTURE(BM_SwiGluOai, avx2, detail::swiglu_oai_avx2, kAvx2);
BENCHMARK_CAPTURE(BM_SwiGluOai, avx512, detail::swiglu_oai_avx512, kAvx512);
#endif

}  // namespace
}  // namespace tandem::kernels

BENCHMARK_MAIN();
