// tandemd's startup rule for GPU experts: a placement with GPU experts and no CUDA device is a
// clear error naming the count; no GPU experts, or a device present, is fine.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "server/engine_startup.h"
#include "server/gpu_startup.h"
#include "server/model_startup.h"

namespace tandem::server {
namespace {

TEST_CASE("GPU experts without a CUDA device refuse to start, naming the count", "[server]") {
  placement::StartupPlacement planned;
  planned.report.n_gpu_experts = 16;
  const Status refused = check_gpu_experts_have_device(planned, 0);
  CHECK(refused.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(refused.message(), Catch::Contains("16 experts on the GPU"));
  CHECK_THAT(refused.message(), Catch::Contains("no CUDA device"));
  CHECK_THAT(refused.message(), Catch::Contains("num_gpu_experts: 0"));
  CHECK(check_gpu_experts_have_device(planned, 1).ok());
  planned.report.n_gpu_experts = 0;
  CHECK(check_gpu_experts_have_device(planned, 0).ok());
}

TEST_CASE("the demo model with 16 GPU experts starts only where a CUDA device is", "[server]") {
  config::Config c;
  c.model.path = std::string(TANDEM_SOURCE_DIR) + "/models/demo/demo-moe-q8_0.gguf";
  c.placement.num_gpu_experts = 16;
  const Result<StartedModel> started = start_model(c);
  REQUIRE(started.ok());
  const int devices = visible_cuda_devices();
  CHECK(devices >= 0);
  CHECK(check_gpu_experts_have_device(started->placement, devices).ok() == (devices > 0));
}

}  // namespace
}  // namespace tandem::server

namespace tandem::server {
namespace {

config::Config demo_with(config::DenseDevice dense) {
  config::Config c;
  c.model.path = std::string(TANDEM_SOURCE_DIR) + "/models/demo/demo-moe-q8_0.gguf";
  c.runtime.dense_device = dense;
  return c;
}

TEST_CASE("probe_gpu: dense parts go to the GPU only where there is one", "[server][gpu]") {
  const Result<GpuProbe> automatic = probe_gpu(demo_with(config::DenseDevice::kAuto));
  REQUIRE(automatic.ok());
  CHECK(automatic->dense_on_gpu == automatic->has_device());
  CHECK(automatic->label.empty() == !automatic->has_device());

  const Result<GpuProbe> cpu = probe_gpu(demo_with(config::DenseDevice::kCpu));
  REQUIRE(cpu.ok());
  CHECK_FALSE(cpu->dense_on_gpu);

  const Result<GpuProbe> gpu = probe_gpu(demo_with(config::DenseDevice::kGpu));
  if (automatic->has_device()) {
    REQUIRE(gpu.ok());
    CHECK(gpu->dense_on_gpu);
  } else {
    REQUIRE(gpu.status().code() == StatusCode::kFailedPrecondition);
    CHECK_THAT(gpu.status().message(), Catch::Contains("runtime.dense_device is gpu"));
    CHECK_THAT(gpu.status().message(), Catch::Contains("runtime.dense_device: cpu"));
  }
}

TEST_CASE("probe_gpu refuses a CUDA device ordinal that does not exist", "[server][gpu]") {
  config::Config c = demo_with(config::DenseDevice::kAuto);
  c.runtime.cuda_device = 1000;
  const Result<GpuProbe> probe = probe_gpu(c);
  if (visible_cuda_devices() == 0) {
    // Nothing to use anyway: everything runs on the CPU.
    REQUIRE(probe.ok());
    CHECK_FALSE(probe->has_device());
    CHECK_FALSE(probe->dense_on_gpu);
  } else {
    REQUIRE(probe.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(probe.status().message(), Catch::Contains("runtime.cuda_device 1000"));
  }
}

TEST_CASE("the budget policy fills placement.gpu_memory_budget without a device", "[server][gpu]") {
  config::Config c = demo_with(config::DenseDevice::kCpu);
  c.placement.policy = config::PlacementPolicy::kBudget;
  const GpuProbe no_device;  // n_devices 0
  const Result<StartedModel> none = start_model(c, no_device);
  REQUIRE(none.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(none.status().message(), Catch::Contains("gpu_memory_budget"));

  // 64 GiB: more than the demo model's reservation plus every expert.
  c.placement.gpu_memory_budget = uint64_t{64} << 30;
  const Result<StartedModel> all = start_model(c, no_device);
  REQUIRE(all.ok());
  CHECK(all->placement.report.n_gpu_experts > 0);
  CHECK(all->placement.placement.map.n_gpu() == all->placement.report.n_gpu_experts);
  // ... which tandemd then refuses to serve without a device.
  CHECK(check_gpu_experts_have_device(all->placement, 0).code() == StatusCode::kFailedPrecondition);
}

TEST_CASE("attach_gpu does nothing when nothing is placed on the GPU", "[server][gpu]") {
  // An all-CPU configuration never touches a device: the same on every machine.
  config::Config c = demo_with(config::DenseDevice::kCpu);
  const Result<StartedModel> model = start_model(c);
  REQUIRE(model.ok());
  const GpuProbe probe;  // dense on the CPU
  Result<ServingEngine> engine = start_engine(c, *model, nullptr, probe);
  REQUIRE(engine.ok());
  CHECK(engine->gpu.experts == nullptr);
  CHECK_FALSE(engine->gpu.dense_on_gpu);
  CHECK(engine->gpu.allocated.total() == 0);
}

TEST_CASE("attach_gpu refuses GPU experts without a device before allocating anything",
          "[server][gpu]") {
  config::Config c = demo_with(config::DenseDevice::kCpu);
  c.placement.num_gpu_experts = 16;
  const Result<StartedModel> model = start_model(c);
  REQUIRE(model.ok());
  const GpuProbe probe;  // no device
  const Result<ServingEngine> engine = start_engine(c, *model, nullptr, probe);
  REQUIRE(engine.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(engine.status().message(), Catch::Contains("16 experts on the GPU"));
}

}  // namespace
}  // namespace tandem::server

namespace tandem::server {
namespace {

// Greedy ids of three concurrent requests (one batch) through a started engine.
std::vector<std::vector<int32_t>> greedy_batch(ServingEngine& engine, size_t n_tokens) {
  const std::vector<std::vector<int32_t>> prompts = {
      {11, 200, 31, 7}, {5, 6, 7, 8, 9, 10, 11, 12, 13}, {300, 301}};
  std::vector<runtime::RequestHandle> handles;
  for (size_t i = 0; i < prompts.size(); ++i) {
    runtime::Request request;
    request.id = "gpu-" + std::to_string(i);
    request.prompt_token_ids = prompts[i];
    request.sampling.temperature = 0.0f;
    request.sampling.max_tokens = static_cast<int>(n_tokens);
    request.sampling.ignore_eos = true;
    Result<runtime::RequestHandle> h = engine.scheduler->submit(std::move(request));
    REQUIRE(h.ok());
    handles.push_back(std::move(h).value());
  }
  REQUIRE(engine.scheduler->start().ok());
  std::vector<std::vector<int32_t>> out;
  for (runtime::RequestHandle& h : handles) {
    std::vector<int32_t> ids;
    while (!h.done()) {
      auto ev = h.next(std::chrono::milliseconds(120000));
      REQUIRE(ev.has_value());
      ids.insert(ids.end(), ev->token_ids.begin(), ev->token_ids.end());
      if (ev->is_final) {
        CHECK(ev->error.ok());
        CHECK(ev->finish_reason == runtime::FinishReason::kLength);
      }
    }
    out.push_back(ids);
  }
  engine.scheduler->stop(runtime::StopMode::kAbort);
  return out;
}

TEST_CASE("[cuda] GPU experts and dense parts on the GPU generate the CPU engine's tokens",
          "[server][gpu][cuda]") {
  config::Config c = demo_with(config::DenseDevice::kAuto);
  const Result<GpuProbe> probe = probe_gpu(c);
  REQUIRE(probe.ok());
  if (!probe->has_device()) {
    WARN("no CUDA device: probe_gpu found none; [cuda] case skipped");
    return;
  }
  REQUIRE(probe->dense_on_gpu);
  c.placement.num_gpu_experts = 32;  // half of the demo model's 64
  const Result<StartedModel> model = start_model(c, *probe);
  REQUIRE(model.ok());
  Result<ServingEngine> gpu = start_engine(c, *model, nullptr, *probe);
  REQUIRE(gpu.ok());
  REQUIRE(gpu->gpu.experts != nullptr);
  CHECK(gpu->gpu.dense_on_gpu);
  CHECK(gpu->gpu.allocated.n_experts == 32);
  CHECK(gpu->gpu.allocated.experts > 0);
  CHECK(gpu->gpu.allocated.dense > 0);
  CHECK(gpu->gpu.allocated.kv > 0);
  const auto on_gpu = greedy_batch(*gpu, 12);

  config::Config cpu_config = demo_with(config::DenseDevice::kCpu);
  const Result<StartedModel> cpu_model = start_model(cpu_config);
  REQUIRE(cpu_model.ok());
  Result<ServingEngine> cpu = start_engine(cpu_config, *cpu_model, nullptr, GpuProbe{});
  REQUIRE(cpu.ok());
  const auto on_cpu = greedy_batch(*cpu, 12);
  // The GPU computes in float where the CPU meets Q8_0 weights with Q8_0 activations, so logits
  // differ by rounding; the trained demo model's greedy margins are far larger than that.
  REQUIRE(on_gpu.size() == on_cpu.size());
  for (size_t i = 0; i < on_gpu.size(); ++i) {
    INFO("request " << i);
    CHECK(on_gpu[i] == on_cpu[i]);
  }
}

}  // namespace
}  // namespace tandem::server
