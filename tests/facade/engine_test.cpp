// Tests of Engine::create on the demo model: the placement from the shipped statistics (the
// numbers `tandem plan` gives for the same file), the device choice and the GPU rules (a clear
// error naming the count for GPU experts without a device). The GPU engine's tokens against the
// CPU engine's are in gpu_engine_test.cpp.
#include "engine/facade/engine.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/gpu/gpu_backend.h"
#include "engine/runtime/prepared_weights.h"
#include "kernels/cpu/matmul.h"
#include "tests/facade/engine_test_support.h"

namespace tandem::engine {
namespace {

TEST_CASE("Engine::create plans the demo model from its statistics", "[engine]") {
  EngineOptions o = demo_options();
  o.placement.stats_path = kDemoStats;
  o.placement.num_gpu_experts = 16;
  EngineStage stage = EngineStage::kDevices;
  const Result<std::unique_ptr<Engine>> engine = Engine::create(o, &stage);
  if (visible_devices() == 0) {
    // The plan is made, then refused: GPU experts need a device.
    REQUIRE(engine.status().code() == StatusCode::kFailedPrecondition);
    CHECK(stage == EngineStage::kCheckpoint);
    CHECK_THAT(engine.status().message(), Catch::Contains("16 experts on the GPU") &&
                                              Catch::Contains("no CUDA device") &&
                                              Catch::Contains("num_gpu_experts: 0"));
    o.placement.num_gpu_experts = 0;
  }
  // The same statistics with no GPU experts (or with them, where a device is).
  const Result<std::unique_ptr<Engine>> served = Engine::create(o);
  REQUIRE(served.ok());
  CHECK((*served)->spec().n_experts == 16);
  const placement::PlacementReport& report = (*served)->placement().report;
  CHECK(report.n_total_experts == 64);
  CHECK_FALSE(report.fell_back_to_uniform);
  REQUIRE(report.coverage.has_value());
  if (report.n_gpu_experts == 16) {
    // 16 of 64 experts chosen by frequency must cover far more than the 25% of a random pick;
    // `tandem plan --stats models/demo/activation-stats.json --num-gpu-experts 16`: 66.01%.
    CHECK(*report.coverage == Approx(0.6601).margin(5e-5));
  }
  CHECK((*served)->facts().context_length == 512);
  CHECK((*served)->facts().model_type == "qwen3_moe");
  CHECK((*served)->tokenizer() != nullptr);
  CHECK((*served)->facts().tokenizer_path.empty());  // export_tokenizer false
}

TEST_CASE("runtime.kv_cache_type f16 (the default): twice the tokens of f32 in the same bytes",
          "[engine][kv]") {
  EngineOptions o = demo_options();
  o.kv_cache_bytes = uint64_t{64} << 20;
  CHECK(o.kv_cache_type == kernels::KvType::kF16);  // the default
  const Result<std::unique_ptr<Engine>> f16 = Engine::create(o);
  REQUIRE(f16.ok());
  o.kv_cache_type = kernels::KvType::kF32;
  const Result<std::unique_ptr<Engine>> f32 = Engine::create(o);
  REQUIRE(f32.ok());
  CHECK((*f32)->scheduler().kv_pool().type() == kernels::KvType::kF32);
  CHECK((*f16)->scheduler().kv_pool().type() == kernels::KvType::kF16);
  CHECK((*f16)->scheduler().kv_total_blocks() == 2 * (*f32)->scheduler().kv_total_blocks());
  CHECK((*f16)->scheduler().kv_pool().bytes() == (*f32)->scheduler().kv_pool().bytes());
  CHECK((*f16)->runner().kv_layout().type == kernels::KvType::kF16);
}

TEST_CASE("Engine::create without statistics places uniformly, with a warning", "[engine]") {
  EngineOptions o = demo_options();
  o.placement.num_gpu_experts = 0;
  const Result<std::unique_ptr<Engine>> engine = Engine::create(o);
  REQUIRE(engine.ok());
  CHECK((*engine)->placement().report.fell_back_to_uniform);
  CHECK_FALSE((*engine)->placement().warnings.empty());
}

TEST_CASE("Engine::create refuses a missing model and statistics of another model", "[engine]") {
  EngineStage stage = EngineStage::kEngine;
  const Result<std::unique_ptr<Engine>> none = Engine::create(EngineOptions(), &stage);
  REQUIRE(none.status().code() == StatusCode::kFailedPrecondition);
  CHECK(stage == EngineStage::kCheckpoint);
  CHECK_THAT(none.status().message(), Catch::Contains("model.path"));

  EngineOptions other = demo_options();
  other.model_path = std::string(TANDEM_SOURCE_DIR) + "/models/demo/demo-moe-f32.gguf";
  other.placement.stats_path = kDemoStats;
  const Result<std::unique_ptr<Engine>> mismatch = Engine::create(other, &stage);
  REQUIRE_FALSE(mismatch.ok());
  CHECK(stage == EngineStage::kCheckpoint);
  CHECK_THAT(mismatch.status().message(), Catch::Contains("activation-stats.json"));
  CHECK_THAT(mismatch.status().message(), Catch::Contains("fingerprint"));
}

TEST_CASE("a context length above the model's is refused naming both numbers", "[engine]") {
  EngineOptions o = demo_options();
  o.context_length = 100000;
  const Result<std::unique_ptr<Engine>> too_long = Engine::create(o);
  REQUIRE(too_long.status().code() == StatusCode::kInvalidArgument);
  CHECK(too_long.status().message() ==
        "model.context_length 100000 is larger than the 512 tokens of context that " + kDemo +
            " declares; set it to at most 512, or 0 for the model's own");
  // The model's own length, less, or 0 (the model's) are fine.
  for (const int n : {512, 100, 0}) {
    o.context_length = n;
    const Result<std::unique_ptr<Engine>> fine = Engine::create(o);
    REQUIRE(fine.ok());
    CHECK((*fine)->facts().context_length == (n == 0 ? 512 : n));
  }
}

TEST_CASE("the device choice: dense parts go to the GPU only where there is one", "[engine][gpu]") {
  const Result<GpuProbe> automatic = probe_gpu(demo_options(DenseDevice::kAuto));
  REQUIRE(automatic.ok());
  CHECK(automatic->backend_built == gpu::backend_built());
  CHECK(automatic->dense_on_gpu == automatic->has_device());
  CHECK(automatic->label.empty() == !automatic->has_device());

  const Result<GpuProbe> cpu = probe_gpu(demo_options(DenseDevice::kCpu));
  REQUIRE(cpu.ok());
  CHECK_FALSE(cpu->dense_on_gpu);

  EngineStage stage = EngineStage::kEngine;
  const Result<std::unique_ptr<Engine>> gpu =
      Engine::create(demo_options(DenseDevice::kGpu), &stage);
  if (automatic->has_device()) {
    REQUIRE(gpu.ok());
    CHECK((*gpu)->gpu().dense_on_gpu);
  } else {
    REQUIRE(gpu.status().code() == StatusCode::kFailedPrecondition);
    CHECK(stage == EngineStage::kDevices);
    CHECK_THAT(gpu.status().message(), Catch::Contains("runtime.dense_device is gpu"));
    CHECK_THAT(gpu.status().message(), Catch::Contains("runtime.dense_device: cpu"));
  }
}

TEST_CASE("a GPU device ordinal that does not exist is refused where devices exist",
          "[engine][gpu]") {
  EngineOptions o = demo_options(DenseDevice::kAuto);
  o.gpu_device = 1000;
  const Result<GpuProbe> probe = probe_gpu(o);
  if (visible_devices() == 0) {
    // Nothing to use anyway: everything runs on the CPU.
    REQUIRE(probe.ok());
    CHECK_FALSE(probe->has_device());
    CHECK_FALSE(probe->dense_on_gpu);
  } else {
    REQUIRE(probe.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(probe.status().message(), Catch::Contains("runtime.cuda_device 1000"));
  }
}

TEST_CASE("the budget policy fills the GPU memory budget without a device", "[engine][gpu]") {
  if (visible_devices() > 0) {
    WARN("a CUDA device is present: no-device budget case skipped");
    return;
  }
  EngineOptions o = demo_options();
  o.placement.policy = placement::PlacementPolicy::kBudget;
  const Result<std::unique_ptr<Engine>> none = Engine::create(o);
  REQUIRE(none.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(none.status().message(), Catch::Contains("gpu_memory_budget"));

  // 64 GiB: more than the demo model's reservation plus every expert; planned, then refused
  // without a device.
  o.gpu_memory_budget = uint64_t{64} << 30;
  const Result<std::unique_ptr<Engine>> all = Engine::create(o);
  REQUIRE(all.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(all.status().message(), Catch::Contains("64 experts on the GPU"));
}

TEST_CASE("an all-CPU engine keeps interleaved copies of the dense matrices the kernels prefer",
          "[engine][gpu]") {
  // tiny-deepseek2's Q4_K_M: Q4_K / Q6_K / Q5_0 dense matrices.
  EngineOptions o = demo_options(DenseDevice::kCpu);
  o.model_path = std::string(TANDEM_SHARED_DIR) + "/data/tiny-deepseek2/tiny-deepseek2-q4_k_m.gguf";
  const Result<std::unique_ptr<Engine>> engine = Engine::create(o);
  REQUIRE(engine.ok());
  const runtime::PreparedWeights& w = (*engine)->runner().prepared_weights();
  if (kernels::interleaved_layout_preferred(w.lm_head.type)) {
    CHECK_FALSE(w.interleaved.empty());
  } else {
    WARN("no interleaved kernel for this type on this CPU: the copies' check skipped");
  }
  o.repack_weights = false;
  const Result<std::unique_ptr<Engine>> unpacked = Engine::create(o);
  REQUIRE(unpacked.ok());
  CHECK((*unpacked)->runner().prepared_weights().interleaved.empty());
}

TEST_CASE("an all-CPU engine touches no device and serves", "[engine][gpu]") {
  const Result<std::unique_ptr<Engine>> engine = Engine::create(demo_options(DenseDevice::kCpu));
  REQUIRE(engine.ok());
  CHECK((*engine)->gpu().experts == nullptr);
  CHECK_FALSE((*engine)->gpu().dense_on_gpu);
  CHECK((*engine)->gpu().allocated.total() == 0);
  Result<std::unique_ptr<runtime::KvCache>> cache = (*engine)->sequence_cache(16);
  REQUIRE(cache.ok());
  const std::vector<int32_t> ids = {11, 200, 31, 7};
  runtime::ForwardOutput out;
  const runtime::SequenceInput seq{cache->get(), ids, 0, runtime::LogitsWanted::kLast};
  REQUIRE((*engine)->runner().forward({&seq, 1}, out).ok());
  CHECK((*cache)->length() == ids.size());
}

}  // namespace
}  // namespace tandem::engine
