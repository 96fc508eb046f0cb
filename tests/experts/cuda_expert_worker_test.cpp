// CudaExpertWorker and the grouped expert FFN kernels against the CPU worker (tag [cuda]).
//
// Catch2 v2 has no SKIP: without a CUDA device each device case WARNs "no CUDA device: ..." and
// returns (it then counts as passed; the warning is in the test output).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/experts/cuda_expert_worker.h"
#include "engine/experts/experts.h"
#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/float_convert.h"
#include "kernels/cuda/cuda_weight_types.h"
#include "kernels/cuda/expert_ffn.h"
#include "tests/experts/random_experts.h"
#include "tests/kernels/random_weights.h"

#include <cuda_runtime.h>

namespace tandem::experts {
namespace {

constexpr size_t kLayers = testing::kRandomExpertLayers;
constexpr size_t kExperts = testing::kRandomExperts;
// The FFN shape of the types with 32-element (or no) blocks: hidden is a multiple of 32 but not
// of the 64-wide output tiles.
constexpr size_t kHidden = 160;
constexpr size_t kFfn = 96;
// The K-quants' shape: rows (matrix columns hidden and ffn) of whole 256-element super-blocks.
constexpr size_t kHiddenK = 512;
constexpr size_t kFfnK = 256;

// True when a device is present; otherwise WARNs why the case does nothing.
bool have_device() {
  if (cuda_device_count() > 0) return true;
  WARN("no CUDA device: cudaGetDeviceCount reports none; [cuda] case skipped");
  return false;
}

// The shape for `type`: (kHidden, kFfn) when both are whole blocks of it, else (kHiddenK, kFfnK).
bool wants_k_shape(TensorType type) {
  const kernels::cuda::CudaWeightType* t = kernels::cuda::find_cuda_weight_type(type);
  return t != nullptr && (kHidden % t->block_elements != 0 || kFfn % t->block_elements != 0);
}

// The random experts of `type`, in the (kHidden, kFfn) shape or, where the type's blocks do not
// divide it, the (kHiddenK, kFfnK) one.
testing::RandomExperts random_experts(TensorType type, uint32_t seed) {
  const bool k_shape = wants_k_shape(type);
  return testing::RandomExperts(type, k_shape ? kHiddenK : kHidden, k_shape ? kFfnK : kFfn, seed);
}

Routing random_routing(size_t n_tokens, size_t k, std::mt19937& rng) {
  return testing::random_routing(n_tokens, k, kExperts, rng);
}

using testing::random_input;

// Both sides dequantize exactly and compute in float; only the summation order (and expf) differ,
// so the tolerance is relative to the largest reference magnitude. K = 160 / 96 terms (512 / 256
// for the K-quants).
double tolerance(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return 1e-4;
    case TensorType::kF16:
    case TensorType::kBF16:
      return 2e-4;
    default:  // the block types: larger magnitudes per block scale, same exact dequantization
      return 2e-4;
  }
}

void check_close(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  REQUIRE(got.size() == want.size());
  double scale = 0.0;
  for (float v : want) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  REQUIRE(scale > 0.0);
  double worst = 0.0;
  size_t worst_i = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    REQUIRE(std::isfinite(got[i]));
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (d > worst) {
      worst = d;
      worst_i = i;
    }
  }
  INFO("worst element " << worst_i << ": got " << got[worst_i] << " want " << want[worst_i]
                        << ", max |want| " << scale);
  CHECK(worst <= tol * scale);
}

// Every type the CUDA kernels take (kCudaWeightTypes).
std::vector<TensorType> cuda_types() {
  std::vector<TensorType> types;
  for (const kernels::cuda::CudaWeightType& t : kernels::cuda::kCudaWeightTypes) {
    types.push_back(t.type);
  }
  return types;
}

// testing::RandomExperts (kHidden x kFfn) made GPT-OSS-shaped: clamped SwiGLU and F32 biases on
// every expert's gate and up ([kExperts x kFfn] per layer) and down ([kExperts x kHidden]). The
// gate and up biases, uniform in [-9, 9], outweigh the matmuls (|gate x| is about 1 here), so
// gate + bias passes the clamp at 7 and up + bias both ends of [-7, 7] for a good share of the
// features (the host case below counts them). Views into its own storage: neither copied nor
// moved.
struct GptOssExperts {
  testing::RandomExperts base;
  std::vector<std::vector<float>> bias_values;  // gate, up, down per layer
  std::vector<model::TensorInfo> bias_tensors;  // fixed size: no realloc

  GptOssExperts(TensorType type, uint32_t seed) : base(type, kHidden, kFfn, seed) {
    base.spec.architecture = model::Architecture::kGptOss;
    base.spec.expert_bias = true;
    base.spec.expert_activation = model::ExpertActivation::kSwiGluOai;
    constexpr model::WeightRole kRoles[3] = {model::WeightRole::kExpertGateBias,
                                             model::WeightRole::kExpertUpBias,
                                             model::WeightRole::kExpertDownBias};
    constexpr const char* kNames[3] = {".gate.bias", ".up.bias", ".down.bias"};
    std::mt19937 rng(seed + 1000);
    bias_values.resize(3 * kLayers);
    bias_tensors.resize(3 * kLayers);
    for (size_t l = 0; l < kLayers; ++l) {
      for (size_t p = 0; p < 3; ++p) {
        const size_t n = p == 2 ? kHidden : kFfn;
        const float range = p == 2 ? 2.0f : 9.0f;
        std::uniform_real_distribution<float> d(-range, range);
        std::vector<float>& v = bias_values[3 * l + p];
        v.resize(kExperts * n);
        for (float& b : v) b = d(rng);
        model::TensorInfo& t = bias_tensors[3 * l + p];
        t.name = "blk." + std::to_string(l) + kNames[p];
        t.type = TensorType::kF32;
        t.shape = {kExperts, n};
        t.n_elements = kExperts * n;
        t.data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()),
                                          v.size() * sizeof(float));
        base.weights.layers[l].tensors[static_cast<size_t>(kRoles[p])] = &t;
      }
    }
  }
  GptOssExperts(const GptOssExperts&) = delete;
  GptOssExperts& operator=(const GptOssExperts&) = delete;
};

// How often a reference run's clamped SwiGLU clamped: gate results above 7, up results below -7
// and above 7, and features where neither clamp applied.
struct ClampHits {
  size_t gate_high = 0;
  size_t up_low = 0;
  size_t up_high = 0;
  size_t neither = 0;
};

// The pair outputs of `layer` in double from dequantize()'s floats of `model`'s weights:
// down(act(gate x + b_g, up x + b_u)) + b_d per pair, with the biases of `gpt_oss` (and its clamped
// SwiGLU) when it is given, else plain SwiGLU without biases. Counts the clamps into `hits`.
std::vector<float> reference_outputs(TensorType type, const testing::RandomExperts& model,
                                     const GptOssExperts* gpt_oss, size_t layer,
                                     const Routing& routing, const std::vector<float>& x,
                                     ClampHits& hits) {
  const size_t hidden = model.hidden;
  const size_t ffn = model.ffn;
  const size_t k = routing.k;
  auto dequant = [&](size_t p, size_t e, size_t rows, size_t cols) {
    const auto& bytes = model.storage[3 * layer + p];
    const size_t slab = bytes.size() / kExperts;
    std::vector<float> w(rows * cols);
    REQUIRE(
        kernels::dequantize(type, std::span<const uint8_t>(bytes).subspan(e * slab, slab), w).ok());
    return w;
  };
  // Expert e's bias of projection p, feature i (0 without biases).
  auto bias = [&](size_t p, size_t e, size_t i) {
    if (gpt_oss == nullptr) return 0.0;
    const size_t n = p == 2 ? hidden : ffn;
    return static_cast<double>(gpt_oss->bias_values[3 * layer + p][e * n + i]);
  };
  constexpr double kLimit = 7.0;
  constexpr double kAlpha = 1.702;
  std::vector<float> want(routing.n_tokens * k * hidden);
  for (size_t pair = 0; pair < routing.n_tokens * k; ++pair) {
    const size_t e = static_cast<size_t>(routing.experts[pair]);
    const auto gate = dequant(0, e, ffn, hidden);
    const auto up = dequant(1, e, ffn, hidden);
    const auto down = dequant(2, e, hidden, ffn);
    const float* xt = x.data() + (pair / k) * hidden;
    std::vector<double> h(ffn);
    for (size_t f = 0; f < ffn; ++f) {
      double g = bias(0, e, f);
      double u = bias(1, e, f);
      for (size_t c = 0; c < hidden; ++c) {
        g += static_cast<double>(gate[f * hidden + c]) * xt[c];
        u += static_cast<double>(up[f * hidden + c]) * xt[c];
      }
      if (gpt_oss == nullptr) {
        h[f] = g / (1.0 + std::exp(-g)) * u;
        continue;
      }
      hits.gate_high += g > kLimit ? 1 : 0;
      hits.up_low += u < -kLimit ? 1 : 0;
      hits.up_high += u > kLimit ? 1 : 0;
      hits.neither += g <= kLimit && std::fabs(u) <= kLimit ? 1 : 0;
      g = std::min(g, kLimit);
      u = std::clamp(u, -kLimit, kLimit);
      h[f] = g / (1.0 + std::exp(-kAlpha * g)) * (u + 1.0);
    }
    for (size_t o = 0; o < hidden; ++o) {
      double acc = bias(2, e, o);
      for (size_t f = 0; f < ffn; ++f) acc += static_cast<double>(down[o * ffn + f]) * h[f];
      want[pair * hidden + o] = static_cast<float>(acc);
    }
  }
  return want;
}

// The CPU worker's pair outputs of `layer` for `routing` and `x`.
std::vector<float> cpu_outputs(const model::ModelSpec& spec, const model::ModelWeights& weights,
                               size_t hidden, size_t layer, const Routing& routing,
                               const std::vector<float>& x) {
  auto cpu = CpuExpertWorker::create(spec, weights, nullptr, kernels::MatmulActivations::kFloat);
  REQUIRE(cpu.ok());
  ExpertGroups groups;
  group_by_expert(routing, kExperts, {}, 0, groups);
  std::vector<float> got(routing.n_tokens * routing.k * hidden);
  ExpertJob job{layer, x, routing.n_tokens, hidden, routing.k, &groups, got};
  REQUIRE((*cpu)->run(job).ok());
  return got;
}

// Runs without a device: the random experts these cases use are valid CPU experts, and the CPU
// worker (the reference of the [cuda] cases) agrees with a double-precision reference built from
// dequantize() here, so a [cuda] failure points at the device side.
TEST_CASE("the random experts of the [cuda] cases are a sound CPU reference", "[cuda][experts]") {
  for (TensorType type : cuda_types()) {
    INFO(tensor_type_name(type));
    testing::RandomExperts model = random_experts(type, 7);
    std::mt19937 rng(1);
    const Routing routing = random_routing(5, 2, rng);
    const std::vector<float> x = random_input(5 * model.hidden, rng);
    ClampHits hits;
    const std::vector<float> want = reference_outputs(type, model, nullptr, 1, routing, x, hits);
    check_close(cpu_outputs(model.spec, model.weights, model.hidden, 1, routing, x), want, 1e-4);
  }
}

// The same for the GPT-OSS-shaped experts of the [cuda] case: the CPU worker's biases and clamped
// SwiGLU against the double reference, on features that hit every clamp (and some that hit none).
TEST_CASE("the GPT-OSS-shaped experts of the [cuda] case hit the clamps and match a reference",
          "[cuda][experts]") {
  for (TensorType type : {TensorType::kMXFP4, TensorType::kF32}) {
    INFO(tensor_type_name(type));
    GptOssExperts model(type, 17);
    std::mt19937 rng(3);
    const Routing routing = random_routing(7, 3, rng);
    const std::vector<float> x = random_input(7 * kHidden, rng);
    for (size_t layer = 0; layer < kLayers; ++layer) {
      INFO("layer " << layer);
      ClampHits hits;
      const std::vector<float> want =
          reference_outputs(type, model.base, &model, layer, routing, x, hits);
      CHECK(hits.gate_high > 0);
      CHECK(hits.up_low > 0);
      CHECK(hits.up_high > 0);
      CHECK(hits.neither > 0);
      check_close(cpu_outputs(model.base.spec, model.base.weights, kHidden, layer, routing, x),
                  want, 1e-4);
    }
  }
}

// Host side of the GPT-OSS support: the device bytes create() plans (and checks against the free
// memory) include each held expert's float biases, and bad bias sizes are refused before any
// device is asked for.
TEST_CASE("the CUDA expert plan counts the held experts' biases", "[cuda][experts]") {
  GptOssExperts biased(TensorType::kMXFP4, 13);
  testing::RandomExperts plain(TensorType::kMXFP4, kHidden, kFfn, 13);
  ExpertMap some = ExpertMap::uniform(kLayers, kExperts, 0);
  some.set(0, 1, 1);
  some.set(0, 5, 1);
  some.set(1, 2, 1);
  const uint64_t bias_bytes = (2 * kFfn + kHidden) * sizeof(float);
  for (const auto& [map, n_held] :
       {std::pair{ExpertMap(), kLayers * kExperts}, std::pair{some, size_t{3}}}) {
    INFO(n_held << " experts held");
    auto with =
        CudaExpertWorker::planned_weight_bytes(biased.base.spec, biased.base.weights, map, 1);
    auto without = CudaExpertWorker::planned_weight_bytes(plain.spec, plain.weights, map, 1);
    REQUIRE(with.ok());
    REQUIRE(without.ok());
    CHECK(*without >= n_held * 3 * (plain.storage[0].size() / kExperts));
    // Each bias row is rounded up to 256 bytes on its own.
    CHECK(*with - *without >= n_held * bias_bytes);
    CHECK(*with - *without < n_held * (bias_bytes + 3 * 256));
  }
  // The clamped SwiGLU alone (no biases) plans as plain SwiGLU does.
  auto swiglu = CudaExpertWorker::planned_weight_bytes(plain.spec, plain.weights, ExpertMap(), 1);
  plain.spec.expert_activation = model::ExpertActivation::kSwiGluOai;
  auto clamped = CudaExpertWorker::planned_weight_bytes(plain.spec, plain.weights, ExpertMap(), 1);
  REQUIRE(swiglu.ok());
  REQUIRE(clamped.ok());
  CHECK(*clamped == *swiglu);
  // A down bias of ffn rather than hidden values per expert.
  model::TensorInfo& down = biased.bias_tensors[3 * 1 + 2];
  down.shape = {kExperts, kFfn};
  down.n_elements = kExperts * kFfn;
  down.data = down.data.first(down.n_elements * sizeof(float));
  auto bad =
      CudaExpertWorker::planned_weight_bytes(biased.base.spec, biased.base.weights, ExpertMap(), 1);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad.status().message(), Catch::Contains("layer 1") && Catch::Contains("bias"));
  // A map that gives this worker nothing of layer 1 does not read that layer's biases.
  ExpertMap layer0 = ExpertMap::uniform(kLayers, kExperts, 0);
  layer0.set(0, 3, 1);
  CHECK(CudaExpertWorker::planned_weight_bytes(biased.base.spec, biased.base.weights, layer0, 1)
            .ok());
}

// The CUDA worker holding every expert of `model` against the CPU worker, for 1, 19 and 300
// tokens in every layer; the device bytes it holds are the plan's.
void expect_worker_matches_cpu(TensorType type, const model::ModelSpec& spec,
                               const model::ModelWeights& weights, size_t hidden) {
  auto cpu = CpuExpertWorker::create(spec, weights, nullptr, kernels::MatmulActivations::kFloat);
  REQUIRE(cpu.ok());
  auto gpu = CudaExpertWorker::create(spec, weights, ExpertMap(), {});
  REQUIRE(gpu.ok());
  CHECK((*gpu)->n_experts_held() == kLayers * kExperts);
  auto planned = CudaExpertWorker::planned_weight_bytes(spec, weights, ExpertMap(), 1);
  REQUIRE(planned.ok());
  CHECK((*gpu)->weight_bytes() == *planned);
  CHECK((*gpu)->device_bytes() >= (*gpu)->weight_bytes());
  std::mt19937 rng(5);
  for (size_t n_tokens : {size_t{1}, size_t{19}, size_t{300}}) {
    for (size_t layer = 0; layer < kLayers; ++layer) {
      INFO(tensor_type_name(type) << ", " << n_tokens << " tokens, layer " << layer);
      const size_t k = 3;
      const Routing routing = random_routing(n_tokens, k, rng);
      const std::vector<float> x = random_input(n_tokens * hidden, rng);
      ExpertGroups groups;
      group_by_expert(routing, kExperts, {}, 0, groups);
      ExpertJob job;
      job.layer = layer;
      job.input = x;
      job.n_tokens = n_tokens;
      job.hidden = hidden;
      job.k = k;
      job.groups = &groups;
      std::vector<float> want(n_tokens * k * hidden, 0.0f);
      std::vector<float> got(n_tokens * k * hidden, -7.0f);
      job.pair_out = want;
      REQUIRE((*cpu)->run(job).ok());
      job.pair_out = got;
      REQUIRE((*gpu)->run(job).ok());
      check_close(got, want, tolerance(type));
    }
  }
}

// MoeLayer with a random CPU/CUDA split of `model`'s experts against MoeLayer all on the CPU.
void expect_mixed_matches_cpu(TensorType type, const model::ModelSpec& spec,
                              const model::ModelWeights& weights, size_t hidden) {
  auto cpu = CpuExpertWorker::create(spec, weights, nullptr, kernels::MatmulActivations::kFloat);
  REQUIRE(cpu.ok());
  std::mt19937 rng(9);
  ExpertMap map = ExpertMap::uniform(kLayers, kExperts, 0);
  for (size_t l = 0; l < kLayers; ++l) {
    for (size_t e = 0; e < kExperts; ++e) map.set(l, e, (rng() & 1) != 0 ? 1 : 0);
  }
  map.set(0, 0, 0);  // both workers certainly have work in layer 0
  map.set(0, 1, 1);
  CudaExpertWorker::Options options;
  options.worker = 1;
  auto gpu = CudaExpertWorker::create(spec, weights, map, options);
  REQUIRE(gpu.ok());
  size_t n_gpu = 0;
  for (size_t l = 0; l < kLayers; ++l) {
    for (size_t e = 0; e < kExperts; ++e) n_gpu += map.worker(l, e) == 1 ? 1 : 0;
  }
  CHECK((*gpu)->n_experts_held() == n_gpu);

  MoeLayer all_cpu({cpu->get()});
  MoeLayer mixed({cpu->get(), gpu->get()});
  for (size_t n_tokens : {size_t{1}, size_t{33}}) {
    for (size_t layer = 0; layer < kLayers; ++layer) {
      INFO(tensor_type_name(type) << ", " << n_tokens << " tokens, layer " << layer);
      const Routing routing = random_routing(n_tokens, 2, rng);
      const std::vector<float> x = random_input(n_tokens * hidden, rng);
      std::vector<float> want(n_tokens * hidden);
      std::vector<float> got(n_tokens * hidden);
      REQUIRE(all_cpu.run(layer, kExperts, x, n_tokens, hidden, routing, ExpertMap(), want).ok());
      REQUIRE(mixed.run(layer, kExperts, x, n_tokens, hidden, routing, map, got).ok());
      check_close(got, want, tolerance(type));
    }
  }
}

TEST_CASE("CUDA expert worker matches the CPU worker for every weight type", "[cuda][experts]") {
  if (!have_device()) return;
  for (TensorType type : cuda_types()) {
    testing::RandomExperts model = random_experts(type, 11);
    expect_worker_matches_cpu(type, model.spec, model.weights, model.hidden);
  }
}

TEST_CASE("MoeLayer with a mixed CPU/CUDA expert map matches all-CPU", "[cuda][experts]") {
  if (!have_device()) return;
  for (TensorType type : cuda_types()) {
    testing::RandomExperts model = random_experts(type, 23);
    expect_mixed_matches_cpu(type, model.spec, model.weights, model.hidden);
  }
}

// GPT-OSS's experts: per-expert gate/up/down biases and the clamped SwiGLU, with MXFP4 (its
// checkpoints' type) and F32 weights, on features that hit the clamps (checked by the host case
// above with the same seed). The same bound as plain SwiGLU: both sides add each bias to the
// finished float dot product and clamp the same floats; only the dot products' summation order
// and expf differ, and the biases (|b| <= 9) are of the order of the outputs they are added to.
TEST_CASE("CUDA expert worker runs GPT-OSS experts (biases, clamped SwiGLU) as the CPU worker",
          "[cuda][experts]") {
  if (!have_device()) return;
  for (TensorType type : {TensorType::kMXFP4, TensorType::kF32}) {
    GptOssExperts model(type, 17);
    expect_worker_matches_cpu(type, model.base.spec, model.base.weights, kHidden);
    expect_mixed_matches_cpu(type, model.base.spec, model.base.weights, kHidden);
  }
}

// ExpertWorker's rule: a pair's result does not depend on the other pairs of the job (so any
// split of the experts between workers changes nothing): each token alone gives the same bits.
TEST_CASE("CUDA expert worker results do not depend on the rest of the job", "[cuda][experts]") {
  if (!have_device()) return;
  testing::RandomExperts model = random_experts(TensorType::kBF16, 41);
  auto gpu = CudaExpertWorker::create(model.spec, model.weights, ExpertMap(), {});
  REQUIRE(gpu.ok());
  std::mt19937 rng(4);
  const size_t n_tokens = 12;
  const size_t k = 4;
  const Routing routing = random_routing(n_tokens, k, rng);
  const std::vector<float> x = random_input(n_tokens * kHidden, rng);
  ExpertGroups groups;
  group_by_expert(routing, kExperts, {}, 0, groups);
  std::vector<float> all(n_tokens * k * kHidden);
  REQUIRE((*gpu)->run(ExpertJob{0, x, n_tokens, kHidden, k, &groups, all}).ok());
  for (size_t t = 0; t < n_tokens; ++t) {
    Routing one;
    one.n_tokens = 1;
    one.k = k;
    one.experts.assign(routing.experts.begin() + t * k, routing.experts.begin() + (t + 1) * k);
    one.weights.assign(k, 1.0f);
    group_by_expert(one, kExperts, {}, 0, groups);
    std::vector<float> alone(k * kHidden);
    const std::span<const float> xt(x.data() + t * kHidden, kHidden);
    REQUIRE((*gpu)->run(ExpertJob{0, xt, 1, kHidden, k, &groups, alone}).ok());
    INFO("token " << t);
    CHECK(std::equal(alone.begin(), alone.end(), all.begin() + t * k * kHidden));
  }
}

// The kernels' own routing-weight scaling and slot-order combine (the worker leaves both to
// MoeLayer): scaled rows combined per token must equal MoeLayer's all-CPU output.
TEST_CASE("expert_ffn kernels scale by the routing weight and combine in slot order",
          "[cuda][experts]") {
  if (!have_device()) return;
  namespace kc = kernels::cuda;
  testing::RandomExperts model = random_experts(TensorType::kQ8_0, 31);
  auto cpu = CpuExpertWorker::create(model.spec, model.weights, nullptr,
                                     kernels::MatmulActivations::kFloat);
  REQUIRE(cpu.ok());
  std::mt19937 rng(2);
  const size_t n_tokens = 21;
  const size_t k = 3;
  const size_t layer = 1;
  const Routing routing = random_routing(n_tokens, k, rng);
  const std::vector<float> x = random_input(n_tokens * kHidden, rng);
  std::vector<float> want(n_tokens * kHidden);
  MoeLayer all_cpu({cpu->get()});
  REQUIRE(all_cpu.run(layer, kExperts, x, n_tokens, kHidden, routing, ExpertMap(), want).ok());

  // Device buffers, freed at the end of the case.
  std::vector<void*> allocations;
  auto upload = [&](const void* src, size_t bytes) {
    void* dst = nullptr;
    REQUIRE(cudaMalloc(&dst, bytes) == cudaSuccess);
    allocations.push_back(dst);
    if (src != nullptr) REQUIRE(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
    return dst;
  };
  ExpertGroups g;
  group_by_expert(routing, kExperts, {}, 0, g);
  const size_t n_rows = g.pairs.size();
  std::vector<kc::DeviceExpert> slots;
  for (int32_t e : g.expert_ids) {
    const void* m[3];
    for (size_t p = 0; p < 3; ++p) {
      const auto& bytes = model.storage[3 * layer + p];
      const size_t slab = bytes.size() / kExperts;
      m[p] = upload(bytes.data() + static_cast<size_t>(e) * slab, slab);
    }
    kc::DeviceExpert slot;  // no biases
    slot.gate = m[0];
    slot.up = m[1];
    slot.down = m[2];
    slots.push_back(slot);
  }
  std::vector<uint32_t> tiles(3 * kc::max_expert_ffn_tiles(n_rows, slots.size()));
  const size_t n_tiles = kc::make_expert_ffn_tiles(g.offsets.data(), slots.size(), tiles.data());
  std::vector<uint32_t> row_input(n_rows);
  std::vector<float> row_scale(n_rows);
  std::vector<uint32_t> pair_row(n_tokens * k, UINT32_MAX);
  for (size_t r = 0; r < n_rows; ++r) {
    row_input[r] = static_cast<uint32_t>(g.pairs[r] / k);
    row_scale[r] = routing.weights[g.pairs[r]];
    pair_row[g.pairs[r]] = static_cast<uint32_t>(r);
  }
  kc::ExpertFfnGroup group;
  group.gate_type = group.up_type = group.down_type = TensorType::kQ8_0;
  group.hidden = kHidden;
  group.ffn = kFfn;
  group.n_experts = slots.size();
  group.n_rows = n_rows;
  group.experts = static_cast<const kc::DeviceExpert*>(
      upload(slots.data(), slots.size() * sizeof(kc::DeviceExpert)));
  group.tiles = static_cast<const uint32_t*>(upload(tiles.data(), 3 * n_tiles * sizeof(uint32_t)));
  group.n_tiles = n_tiles;
  group.row_input = static_cast<const uint32_t*>(upload(row_input.data(), n_rows * 4));
  group.row_scale = static_cast<const float*>(upload(row_scale.data(), n_rows * 4));
  group.x = static_cast<const float*>(upload(x.data(), x.size() * 4));
  group.h = static_cast<float*>(upload(nullptr, n_rows * kFfn * 4));
  group.out = static_cast<float*>(upload(nullptr, n_rows * kHidden * 4));
  auto* d_pair_row = static_cast<const uint32_t*>(upload(pair_row.data(), pair_row.size() * 4));
  auto* d_token_out = static_cast<float*>(upload(nullptr, n_tokens * kHidden * 4));
  REQUIRE(kc::expert_ffn_enqueue(group, nullptr).ok());
  REQUIRE(kc::expert_ffn_combine_enqueue(d_pair_row, group.out, n_tokens, k, kHidden, d_token_out,
                                         nullptr)
              .ok());
  std::vector<float> got(n_tokens * kHidden);
  REQUIRE(cudaMemcpy(got.data(), d_token_out, got.size() * 4, cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  for (void* p : allocations) cudaFree(p);
  check_close(got, want, tolerance(TensorType::kQ8_0));

  // An unsupported type is refused before any launch.
  group.down_type = TensorType::kIQ4_NL;
  CHECK(kc::expert_ffn_enqueue(group, nullptr).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("CUDA expert worker refuses what it cannot run", "[cuda][experts]") {
  if (cuda_device_count() == 0) {
    // The one case that runs everywhere: no device is a clear UNAVAILABLE, not a crash.
    testing::RandomExperts model = random_experts(TensorType::kF16, 3);
    auto gpu = CudaExpertWorker::create(model.spec, model.weights, ExpertMap(), {});
    REQUIRE_FALSE(gpu.ok());
    CHECK(gpu.status().code() == StatusCode::kUnavailable);
    CHECK_THAT(gpu.status().message(), Catch::Contains("no CUDA device"));
    return;
  }
  testing::RandomExperts model = random_experts(TensorType::kF16, 3);
  // IQ4_NL is a valid model type the CUDA kernels do not take (same block size as Q8_0's 32).
  std::vector<uint8_t> iq4(kExperts * kFfn * (kHidden / 32) * 18, 0);
  model.tensors[0].type = TensorType::kIQ4_NL;
  model.tensors[0].data = iq4;
  auto bad = CudaExpertWorker::create(model.spec, model.weights, ExpertMap(), {});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kUnimplemented);
  CHECK_THAT(bad.status().message(),
             Catch::Contains("iq4_nl") && Catch::Contains(kernels::cuda::cuda_weight_type_names()));

  CudaExpertWorker::Options options;
  options.device = 1000;
  testing::RandomExperts good = random_experts(TensorType::kF16, 4);
  CHECK(CudaExpertWorker::create(good.spec, good.weights, ExpertMap(), options).status().code() ==
        StatusCode::kInvalidArgument);

  // A job naming an expert the worker does not hold is an error, not a crash.
  ExpertMap map = ExpertMap::uniform(kLayers, kExperts, 0);
  map.set(1, 2, 1);
  options.device = 0;
  options.worker = 1;
  auto gpu = CudaExpertWorker::create(good.spec, good.weights, map, options);
  REQUIRE(gpu.ok());
  CHECK((*gpu)->n_experts_held() == 1);
  Routing routing;
  routing.n_tokens = 1;
  routing.k = 1;
  routing.experts = {3};
  routing.weights = {1.0f};
  ExpertGroups groups;
  group_by_expert(routing, kExperts, {}, 0, groups);
  std::vector<float> x(kHidden, 0.5f);
  std::vector<float> out(kHidden);
  ExpertJob job{1, x, 1, kHidden, 1, &groups, out};
  CHECK((*gpu)->run(job).code() == StatusCode::kFailedPrecondition);
  routing.experts = {2};
  group_by_expert(routing, kExperts, {}, 0, groups);
  CHECK((*gpu)->run(job).ok());
}

}  // namespace
}  // namespace tandem::experts
