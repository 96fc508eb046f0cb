// Benchmark: kernels::attention_heads on a Qwen3-MoE-shaped layer (32 query heads, 4 KV heads,
// head_dim 128) over a contiguous cache: one decode token at contexts of 64 .. 4096 positions
// (BM_AttentionDecode), the same over 32 such caches in turn, f32 and f16 (BM_AttentionDecodeCold:
// as in a model, where a layer's cache has left the CPU caches by the time that layer runs again)
// and a
// prefill of n tokens from position 0, f32 and f16 (BM_AttentionPrefill), and a DeepSeek-shaped
// MLA decode (BM_AttentionDecodeMla: 16 or 8 query heads over one latent row of 576 halves per
// position, values its first 512, over 8 such caches in turn), and the row kernels themselves, each
// variant this CPU runs (BM_AttentionRows: the scores then the value sums of one call's heads over
// contiguous f32 rows, as a gathered prefill or an MLA layer passes them). One thread, every head;
// the counter GFLOP/s counts 2 flops per multiply-add of the scores and of the value sums (4 *
// heads * head_dim per visible position). Compare within one run.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/cpu_features.h"

namespace tandem::kernels {
namespace {

constexpr size_t kHeads = 32;
constexpr size_t kKvHeads = 4;
constexpr size_t kDim = 128;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

AttentionConfig config() {
  AttentionConfig c;
  c.n_heads = kHeads;
  c.n_kv_heads = kKvHeads;
  c.head_dim = kDim;
  c.scale = 0.08838834764f;  // 1 / sqrt(128)
  return c;
}

// n_q query tokens at positions start .. start + n_q - 1 over a cache of `type` (the cache holds
// start + n_q rows, one block).
void run(benchmark::State& state, size_t start, size_t n_q, KvType type) {
  const size_t n_ctx = start + n_q;
  const size_t elements = n_ctx * kKvHeads * kDim;
  std::vector<uint8_t> k(elements * kv_type_bytes(type)), v(k.size());
  store_kv_elements(type, random_floats(elements, 1).data(), k.data(), elements);
  store_kv_elements(type, random_floats(elements, 2).data(), v.data(), elements);
  const std::vector<float> q = random_floats(n_q * kHeads * kDim, 3);
  std::vector<float> out(n_q * kHeads * kDim);
  const AttentionConfig c = config();
  static constexpr int32_t kOneBlock[1] = {0};
  const KvBlocks kv{k.data(), v.data(), kOneBlock, n_ctx, 1, type};
  for (auto _ : state) {
    attention_heads(q, n_q, start, kv, c, out, 0, kHeads);
    benchmark::DoNotOptimize(out.data());
  }
  // Visible positions summed over the query tokens: start + 1 .. start + n_q.
  const double visible = static_cast<double>(n_q) * static_cast<double>(start) +
                         static_cast<double>(n_q) * static_cast<double>(n_q + 1) / 2.0;
  const double flops = 4.0 * kHeads * kDim * visible;
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

void BM_AttentionDecode(benchmark::State& state) {
  run(state, static_cast<size_t>(state.range(0)) - 1, 1, KvType::kF32);
}

// Arguments: the context, and the cache's element type (0 = f32, 1 = f16; kv_type.h).
void BM_AttentionDecodeCold(benchmark::State& state) {
  constexpr size_t kLayers = 32;
  const size_t n_ctx = static_cast<size_t>(state.range(0));
  const KvType type = state.range(1) == 0 ? KvType::kF32 : KvType::kF16;
  const size_t elements = n_ctx * kKvHeads * kDim;
  std::vector<std::vector<uint8_t>> k, v;
  for (size_t l = 0; l < kLayers; ++l) {
    for (auto* cache : {&k, &v}) {
      const std::vector<float> x =
          random_floats(elements, static_cast<uint32_t>(2 * l + 1 + (cache == &v)));
      cache->emplace_back(elements * kv_type_bytes(type));
      store_kv_elements(type, x.data(), cache->back().data(), elements);
    }
  }
  const std::vector<float> q = random_floats(kHeads * kDim, 3);
  std::vector<float> out(kHeads * kDim);
  const AttentionConfig c = config();
  static constexpr int32_t kOneBlock[1] = {0};
  size_t layer = 0;
  for (auto _ : state) {
    const KvBlocks kv{k[layer].data(), v[layer].data(), kOneBlock, n_ctx, 1, type};
    attention_heads(q, 1, n_ctx - 1, kv, c, out, 0, kHeads);
    benchmark::DoNotOptimize(out.data());
    layer = (layer + 1) % kLayers;
  }
  const double flops = 4.0 * kHeads * kDim * static_cast<double>(n_ctx);
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.counters["KV GB/s"] =
      benchmark::Counter(2.0 * static_cast<double>(elements * kv_type_bytes(type)) *
                             static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}

// Arguments: the context, and the query heads (16: a whole DeepSeek-shaped layer on one thread; 8:
// one of two threads' items). f16 keys-only cache, as the MLA layers keep it.
void BM_AttentionDecodeMla(benchmark::State& state) {
  constexpr size_t kLayers = 8;
  constexpr size_t kRow = 576;
  constexpr size_t kLatent = 512;
  const size_t n_ctx = static_cast<size_t>(state.range(0));
  const size_t heads = static_cast<size_t>(state.range(1));
  const size_t elements = n_ctx * kRow;
  std::vector<std::vector<uint8_t>> caches;
  for (size_t l = 0; l < kLayers; ++l) {
    const std::vector<float> x = random_floats(elements, static_cast<uint32_t>(l + 1));
    caches.emplace_back(elements * kv_type_bytes(KvType::kF16));
    store_kv_elements(KvType::kF16, x.data(), caches.back().data(), elements);
  }
  const std::vector<float> q = random_floats(heads * kRow, 3);
  std::vector<float> out(heads * kLatent);
  AttentionConfig c;
  c.n_heads = heads;
  c.n_kv_heads = 1;
  c.head_dim = kRow;
  c.value_dim = kLatent;
  c.scale = 0.0721687836f;  // 1 / sqrt(192)
  static constexpr int32_t kOneBlock[1] = {0};
  size_t layer = 0;
  for (auto _ : state) {
    const KvBlocks kv{caches[layer].data(), caches[layer].data(), kOneBlock, n_ctx, 1,
                      KvType::kF16};
    attention_heads(q, 1, n_ctx - 1, kv, c, out, 0, heads);
    benchmark::DoNotOptimize(out.data());
    layer = (layer + 1) % kLayers;
  }
  const double flops = 2.0 * static_cast<double>(heads * (kRow + kLatent) * n_ctx);
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

// Arguments: the prompt's tokens, and the cache's element type (0 = f32, 1 = f16).
void BM_AttentionPrefill(benchmark::State& state) {
  run(state, 0, static_cast<size_t>(state.range(0)),
      state.range(1) == 0 ? KvType::kF32 : KvType::kF16);
}

// Arguments: the variant (0 scalar, 1 AVX2, 2 AVX-512), the rows, the heads sharing them and the
// row width, keys and values alike (128: a GQA head's; 576: MLA's latent row, whose first 512 are
// the values in a model). Skipped where the CPU lacks the variant.
void BM_AttentionRows(benchmark::State& state) {
  const CpuFeatures& f = cpu_features();
  const int64_t variant = state.range(0);
  if ((variant >= 1 && !(f.avx2 && f.fma)) || (variant == 2 && !f.avx512f)) {
    state.SkipWithError("this CPU lacks the variant");
    return;
  }
  const auto scores_fn = variant == 0   ? detail::attention_scores_scalar
                         : variant == 1 ? detail::attention_scores_avx2
                                        : detail::attention_scores_avx512;
  const auto accumulate_fn = variant == 0   ? detail::attention_accumulate_scalar
                             : variant == 1 ? detail::attention_accumulate_avx2
                                            : detail::attention_accumulate_avx512;
  const size_t rows = static_cast<size_t>(state.range(1));
  const size_t heads = static_cast<size_t>(state.range(2));
  const size_t dim = static_cast<size_t>(state.range(3));
  const std::vector<float> kv = random_floats(rows * dim, 1);
  const std::vector<float> q = random_floats(heads * dim, 2);
  std::vector<float> scores(heads * rows), out(heads * dim);
  for (auto _ : state) {
    scores_fn(q.data(), heads, kv.data(), dim, rows, dim, 0.01f, scores.data(), rows);
    accumulate_fn(scores.data(), rows, heads, kv.data(), dim, rows, dim, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  const double flops = 4.0 * static_cast<double>(heads * dim * rows);
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

BENCHMARK(BM_AttentionDecode)->Arg(64)->Arg(256)->Arg(1024)->Arg(4096);
BENCHMARK(BM_AttentionDecodeCold)->ArgsProduct({{512, 2048, 4096}, {0, 1}});
BENCHMARK(BM_AttentionDecodeMla)->ArgsProduct({{160, 640, 2048, 4096}, {16, 8}});
BENCHMARK(BM_AttentionPrefill)
    ->ArgsProduct({{128, 512, 2048}, {0, 1}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AttentionRows)->ArgsProduct({{0, 1, 2}, {256, 2048}, {8, 16}, {128, 576}});

}  // namespace
}  // namespace tandem::kernels

BENCHMARK_MAIN();
