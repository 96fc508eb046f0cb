// CpuExpertWorker: every weight type of the kernel table on its quantized and float paths against
// a double-precision reference over dequantize(), bit-identical for any thread count, any split of
// the experts and with or without the interleaved expert copies, and the refusals of create().
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "engine/experts/experts.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/float_convert.h"
#include "tests/experts/random_experts.h"

namespace tandem::experts {
namespace {

constexpr size_t kHidden = 512;  // whole 256-element blocks, so every type fits one shape
constexpr size_t kFfn = 256;
constexpr size_t kTokens = 9;

const TensorType kTypes[] = {TensorType::kF32,  TensorType::kF16,  TensorType::kBF16,
                             TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kMXFP4,
                             TensorType::kQ2_K, TensorType::kQ3_K, TensorType::kQ4_K,
                             TensorType::kQ5_K, TensorType::kQ6_K, TensorType::kF8_E4M3_B128};

// One expert's matrix (rows x cols of the fused tensor) dequantized.
std::vector<float> expert_floats(const model::TensorInfo& t, size_t expert) {
  const size_t rows = t.shape[1];
  const size_t cols = t.shape[2];
  const size_t bytes = t.data.size() / t.shape[0];
  std::vector<float> out(rows * cols);
  REQUIRE(kernels::dequantize(t.type, t.data.subspan(expert * bytes, bytes), out).ok());
  return out;
}

// v rounded as the kernels see it in `format`: quantized to it and converted back (unchanged for
// kF32).
std::vector<double> as_seen(kernels::ActivationFormat format, const std::vector<float>& v) {
  std::vector<double> out(v.begin(), v.end());
  if (format == kernels::ActivationFormat::kF32) return out;
  kernels::QuantizedActivations q;
  kernels::quantize_activations(format, v, 1, v.size(), q);
  if (format == kernels::ActivationFormat::kBF16) {
    for (size_t i = 0; i < v.size(); ++i) out[i] = kernels::bf16_to_fp32(q.bf16[i]);
    return out;
  }
  const size_t block = kernels::activation_block_elements(format);
  for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<double>(q.qs[i]) * q.d[i / block];
  return out;
}

// down(silu(gate x) * up x) in double over the exactly dequantized weights, the input and the
// hidden activations rounded to the formats the gate/up and down types meet in `mode`.
std::vector<double> reference_pair(const testing::RandomExperts& m, size_t layer, size_t expert,
                                   const float* x_in, kernels::MatmulActivations mode) {
  const model::TensorInfo& tg = m.tensors[3 * layer];
  const model::TensorInfo& td = m.tensors[3 * layer + 2];
  const std::vector<float> gate = expert_floats(tg, expert);
  const std::vector<float> up = expert_floats(m.tensors[3 * layer + 1], expert);
  const std::vector<float> down = expert_floats(td, expert);
  const std::vector<double> x = as_seen(kernels::matmul_activation_format(tg.type, mode),
                                        std::vector<float>(x_in, x_in + m.hidden));
  std::vector<float> hf(m.ffn);
  for (size_t r = 0; r < m.ffn; ++r) {
    double g = 0.0, u = 0.0;
    for (size_t c = 0; c < m.hidden; ++c) {
      g += static_cast<double>(gate[r * m.hidden + c]) * x[c];
      u += static_cast<double>(up[r * m.hidden + c]) * x[c];
    }
    hf[r] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
  }
  const std::vector<double> h = as_seen(kernels::matmul_activation_format(td.type, mode), hf);
  std::vector<double> y(m.hidden);
  for (size_t r = 0; r < m.hidden; ++r) {
    double s = 0.0;
    for (size_t c = 0; c < m.ffn; ++c) s += static_cast<double>(down[r * m.ffn + c]) * h[c];
    y[r] = s;
  }
  return y;
}

// Runs `worker` on layer `layer` for the routing's pairs whose expert passes `keep`, into out.
template <typename Keep>
Status run_pairs(CpuExpertWorker& worker, size_t layer, const std::vector<float>& x,
                 const Routing& routing, Keep keep, std::vector<float>& out) {
  std::vector<uint8_t> owner(testing::kRandomExperts);
  for (size_t e = 0; e < owner.size(); ++e) owner[e] = keep(e) ? 0 : 1;
  ExpertGroups groups;
  group_by_expert(routing, testing::kRandomExperts, owner, 0, groups);
  ExpertJob job;
  job.layer = layer;
  job.input = x;
  job.n_tokens = routing.n_tokens;
  job.hidden = kHidden;
  job.k = routing.k;
  job.groups = &groups;
  job.pair_out = out;
  return worker.run(job);
}

std::unique_ptr<CpuExpertWorker> make_worker(const testing::RandomExperts& m, ThreadPool* pool,
                                             kernels::MatmulActivations mode) {
  auto w = CpuExpertWorker::create(m.spec, m.weights, pool, mode);
  REQUIRE(w.ok());
  return std::move(*w);
}

TEST_CASE("CPU expert worker matches the dequantized double reference for every type",
          "[experts]") {
  std::mt19937 rng(5);
  const std::vector<float> x = testing::random_input(kTokens * kHidden, rng);
  const Routing routing = testing::random_routing(kTokens, 3, testing::kRandomExperts, rng);
  ThreadPool pool(2);
  for (TensorType type : kTypes) {
    testing::RandomExperts m(type, kHidden, kFfn, 17);
    for (auto mode : {kernels::MatmulActivations::kFloat, kernels::MatmulActivations::kQuantized}) {
      const bool quantized =
          kernels::matmul_activation_format(type, mode) != kernels::ActivationFormat::kF32;
      INFO(tensor_type_name(type) << (quantized ? " quantized" : " float"));
      auto worker = make_worker(m, &pool, mode);
      std::vector<float> out(kTokens * 3 * kHidden, NAN);
      REQUIRE(run_pairs(
                  *worker, 1, x, routing, [](size_t) { return true; }, out)
                  .ok());
      // The reference rounds the activations as the kernels do, so what is left is float
      // rounding (relative 1e-4 of the output's L2 norm) and, on the quantized path, the hidden
      // quants that the kernel's float h and the reference's double h round differently (one
      // step of 1/127 of a block's largest value now and then): within 1e-3.
      const double bound = quantized ? 1e-3 : 1e-4;
      for (size_t p = 0; p < kTokens * 3; ++p) {
        const std::vector<double> want = reference_pair(
            m, 1, static_cast<size_t>(routing.experts[p]), &x[p / 3 * kHidden], mode);
        double err = 0.0, norm = 0.0;
        for (size_t r = 0; r < kHidden; ++r) {
          const double d = out[p * kHidden + r] - want[r];
          err += d * d;
          norm += want[r] * want[r];
        }
        INFO("pair " << p);
        CHECK(std::sqrt(err) <= bound * std::sqrt(norm));
      }
    }
  }
}

TEST_CASE("CPU expert worker is bit-identical for any thread count and any split of the experts",
          "[experts]") {
  std::mt19937 rng(9);
  const std::vector<float> x = testing::random_input(kTokens * kHidden, rng);
  const Routing routing = testing::random_routing(kTokens, 3, testing::kRandomExperts, rng);
  ThreadPool one(1);
  ThreadPool two(2);
  for (TensorType type : kTypes) {
    INFO(tensor_type_name(type));
    testing::RandomExperts m(type, kHidden, kFfn, 23);
    const auto mode = kernels::MatmulActivations::kQuantized;
    auto single = make_worker(m, &one, mode);
    auto pooled = make_worker(m, &two, mode);
    const size_t n = kTokens * 3 * kHidden;
    std::vector<float> a(n, NAN), b(n, NAN), c(n, NAN);
    const auto all = [](size_t) { return true; };
    REQUIRE(run_pairs(*single, 0, x, routing, all, a).ok());
    REQUIRE(run_pairs(*pooled, 0, x, routing, all, b).ok());
    // The experts in two halves, one job each, into the same output rows.
    REQUIRE(run_pairs(
                *pooled, 0, x, routing, [](size_t e) { return e % 2 == 0; }, c)
                .ok());
    REQUIRE(run_pairs(
                *pooled, 0, x, routing, [](size_t e) { return e % 2 == 1; }, c)
                .ok());
    CHECK(std::memcmp(a.data(), b.data(), n * sizeof(float)) == 0);
    CHECK(std::memcmp(a.data(), c.data(), n * sizeof(float)) == 0);
  }
}

TEST_CASE("CPU expert worker gives the same bits with and without interleaved expert copies",
          "[experts]") {
  std::mt19937 rng(13);
  const std::vector<float> x = testing::random_input(kTokens * kHidden, rng);
  const Routing routing = testing::random_routing(kTokens, 3, testing::kRandomExperts, rng);
  ThreadPool two(2);
  for (TensorType type : kTypes) {
    for (auto mode : {kernels::MatmulActivations::kQuantized, kernels::MatmulActivations::kFloat}) {
      const bool quantized =
          kernels::matmul_activation_format(type, mode) != kernels::ActivationFormat::kF32;
      INFO(tensor_type_name(type) << (quantized ? " quantized" : " float"));
      testing::RandomExperts m(type, kHidden, kFfn, 31);
      auto copied = CpuExpertWorker::create(m.spec, m.weights, &two, mode, {.interleave = true});
      auto mapped = CpuExpertWorker::create(m.spec, m.weights, &two, mode, {.interleave = false});
      REQUIRE(copied.ok());
      REQUIRE(mapped.ok());
      // Only the types the kernels prefer interleaved are copied (MXFP4 on an AVX2 CPU), and only
      // on the quantized path: every MoE layer's gate, up and down of every expert.
      const bool interleaved = quantized && kernels::interleaved_layout_preferred(type);
      CHECK(((*copied)->interleaved_bytes() > 0) == interleaved);
      CHECK((*mapped)->interleaved_bytes() == 0);
      if (interleaved) {
        size_t want = 0;
        for (const model::TensorInfo& t : m.tensors) want += t.data.size();
        CHECK((*copied)->interleaved_bytes() >= want);
      }
      const size_t n = kTokens * 3 * kHidden;
      std::vector<float> a(n, NAN), b(n, NAN);
      const auto all = [](size_t) { return true; };
      for (size_t layer = 0; layer < 2; ++layer) {
        INFO("layer " << layer);
        REQUIRE(run_pairs(**copied, layer, x, routing, all, a).ok());
        REQUIRE(run_pairs(**mapped, layer, x, routing, all, b).ok());
        CHECK(std::memcmp(a.data(), b.data(), n * sizeof(float)) == 0);
      }
    }
  }
  if (!kernels::interleaved_layout_preferred(TensorType::kMXFP4)) {
    WARN("interleaved MXFP4 experts not exercised: the active kernels do not prefer them");
  }
}

TEST_CASE("CPU expert worker leaves the experts a GPU will hold on the checkpoint's rows",
          "[experts]") {
  // Experts placed on a GPU are computed by the CPU only for the start-up self-check: they are
  // not copied, and the rows give the same bits as the copies.
  std::mt19937 rng(17);
  const std::vector<float> x = testing::random_input(kTokens * kHidden, rng);
  const Routing routing = testing::random_routing(kTokens, 3, testing::kRandomExperts, rng);
  ThreadPool two(2);
  const std::vector<std::pair<uint32_t, uint32_t>> gpu = {{0, 1}, {1, 0}, {1, 3}, {7, 2}, {0, 99}};
  size_t exercised = 0;
  for (TensorType type : kTypes) {
    const auto mode = kernels::MatmulActivations::kQuantized;
    if (!kernels::interleaved_layout_preferred(type) ||
        kernels::matmul_activation_format(type, mode) == kernels::ActivationFormat::kF32) {
      continue;
    }
    ++exercised;
    INFO(tensor_type_name(type));
    testing::RandomExperts m(type, kHidden, kFfn, 41);
    auto all = CpuExpertWorker::create(m.spec, m.weights, &two, mode);
    auto some = CpuExpertWorker::create(m.spec, m.weights, &two, mode, {.plain = gpu});
    REQUIRE(all.ok());
    REQUIRE(some.ok());
    for (size_t layer = 0; layer < 2; ++layer) {
      for (size_t e = 0; e < testing::kRandomExperts; ++e) {
        INFO("layer " << layer << " expert " << e);
        const bool plain = (layer == 0 && e == 1) || (layer == 1 && (e == 0 || e == 3));
        const ExpertMatrices& view = (*some)->expert(layer, e);
        const ExpertMatrices& copy = (*all)->expert(layer, e);
        // One expert's gate rows: expert e's slice of the layer's gate tensor.
        const model::LayerWeights& lw = m.weights.layers[layer];
        const uint8_t* rows = lw.experts_gate.expert(e).data.data();
        CHECK(copy.gate.data != rows);
        CHECK((view.gate.data == rows) == plain);
        CHECK((view.gate.layout == kernels::WeightLayout::kRows) == plain);
        CHECK((view.down.layout == kernels::WeightLayout::kRows) == plain);
      }
    }
    const size_t n = kTokens * 3 * kHidden;
    std::vector<float> a(n, NAN), b(n, NAN);
    const auto every = [](size_t) { return true; };
    for (size_t layer = 0; layer < 2; ++layer) {
      INFO("layer " << layer);
      REQUIRE(run_pairs(**all, layer, x, routing, every, a).ok());
      REQUIRE(run_pairs(**some, layer, x, routing, every, b).ok());
      CHECK(std::memcmp(a.data(), b.data(), n * sizeof(float)) == 0);
    }
  }
  if (exercised == 0) WARN("no type the active kernels prefer interleaved: case not exercised");
}

TEST_CASE("CPU expert worker refuses experts that mix weight types in one layer", "[experts]") {
  testing::RandomExperts m(TensorType::kQ8_0, kHidden, kFfn, 3);
  m.tensors[1].type = TensorType::kQ4_K;  // layer 0's up, with bytes of that type
  std::mt19937 rng(1);
  m.storage[1] = testing::random_weight_bytes(TensorType::kQ4_K, testing::kRandomExperts * kFfn,
                                              kHidden, 0.2f, rng);
  m.tensors[1].data = m.storage[1];
  auto w = CpuExpertWorker::create(m.spec, m.weights, nullptr, kernels::MatmulActivations::kFloat);
  REQUIRE_FALSE(w.ok());
  CHECK(w.status().code() == StatusCode::kUnimplemented);
  CHECK_THAT(w.status().message(),
             Catch::Contains("layer 0") && Catch::Contains("q8_0") && Catch::Contains("q4_K"));
}

}  // namespace
}  // namespace tandem::experts
