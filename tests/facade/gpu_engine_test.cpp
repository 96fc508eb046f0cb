// The Engine with its GPU parts on a CUDA device ([cuda]: skipped without one; run on the host
// emulation by gpu_facade_test_emulated): GPU experts and dense parts generate the CPU engine's
// tokens (also with the model read into memory, its GPU-held bytes freed), and gpt-oss's dense
// parts pass the start-up self-check and serve.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "engine/facade/engine.h"
#include "tests/facade/engine_test_support.h"

namespace tandem::engine {
namespace {

// Greedy ids of three concurrent requests (one batch) through a started engine.
std::vector<std::vector<int32_t>> greedy_batch(Engine& engine, size_t n_tokens) {
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
    Result<runtime::RequestHandle> h = engine.submit(std::move(request));
    REQUIRE(h.ok());
    handles.push_back(std::move(h).value());
  }
  REQUIRE(engine.start().ok());
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
  engine.stop(runtime::StopMode::kAbort);
  return out;
}

TEST_CASE("[cuda] GPU experts and dense parts on the GPU generate the CPU engine's tokens",
          "[engine][gpu][cuda]") {
  if (visible_devices() == 0) {
    WARN("no CUDA device: [cuda] case skipped");
    return;
  }
  EngineOptions o = demo_options(DenseDevice::kAuto);
  o.placement.num_gpu_experts = 32;  // half of the demo model's 64
  Result<std::unique_ptr<Engine>> gpu = Engine::create(o);
  REQUIRE(gpu.ok());
  REQUIRE((*gpu)->gpu().experts != nullptr);
  CHECK((*gpu)->gpu().dense_on_gpu);
  CHECK((*gpu)->gpu().allocated.n_experts == 32);
  CHECK((*gpu)->gpu().allocated.experts > 0);
  // The memory plan counts the expert bytes the worker allocates (each part aligned).
  CHECK((*gpu)->gpu().allocated.experts == (*gpu)->gpu().planned.experts);
  CHECK((*gpu)->gpu().allocated.dense > 0);
  CHECK((*gpu)->gpu().allocated.kv > 0);
  // The CPU computes the dense parts only for the self-check: no interleaved host copies.
  CHECK((*gpu)->runner().prepared_weights().interleaved.empty());
  // Nor the GPU's experts: the CPU worker keeps them on the checkpoint's rows, the others copied
  // where the kernels prefer (Q8_0 row quads on AVX2).
  const experts::CpuExpertWorker& cpu_worker = (*gpu)->runner().cpu_worker();
  const std::vector<std::pair<uint32_t, uint32_t>> on_device =
      (*gpu)->placement().placement.map.gpu_experts();
  REQUIRE(on_device.size() == 32);
  for (const auto& [layer, expert] : on_device) {
    INFO("layer " << layer << " expert " << expert);
    CHECK(cpu_worker.expert(layer, expert).gate.layout == kernels::WeightLayout::kRows);
    CHECK(cpu_worker.expert(layer, expert).down.layout == kernels::WeightLayout::kRows);
  }
  if (cpu_worker.interleaved_bytes() > 0) {
    const model::ModelSpec& spec = (*gpu)->runner().spec();
    size_t copied = 0;
    for (size_t l = 0; l < spec.n_layers; ++l) {
      for (size_t e = 0; spec.moe_layers[l] && e < spec.n_experts; ++e) {
        if (cpu_worker.expert(l, e).gate.layout != kernels::WeightLayout::kRows) ++copied;
      }
    }
    CHECK(copied == spec.n_moe_layers() * spec.n_experts - 32);
  }
  const auto on_gpu = greedy_batch(**gpu, 12);

  Result<std::unique_ptr<Engine>> cpu = Engine::create(demo_options(DenseDevice::kCpu));
  REQUIRE(cpu.ok());
  const auto on_cpu = greedy_batch(**cpu, 12);
  // The GPU computes in float where the CPU meets Q8_0 weights with Q8_0 activations, so logits
  // differ by rounding; the trained demo model's greedy margins are far larger than that.
  REQUIRE(on_gpu.size() == on_cpu.size());
  for (size_t i = 0; i < on_gpu.size(); ++i) {
    INFO("request " << i);
    CHECK(on_gpu[i] == on_cpu[i]);
  }
}

TEST_CASE("[cuda] read into memory, the GPU engine serves after the GPU-held bytes are freed",
          "[engine][gpu][cuda]") {
  // model.load_mode read: once the self-check passed, the copy's bytes of the GPU's experts and
  // dense parts (and of the CPU's repacked experts) are freed and unreadable; serving must not
  // read them (a read would fault).
  if (visible_devices() == 0) {
    WARN("no CUDA device: [cuda] case skipped");
    return;
  }
  EngineOptions o = demo_options(DenseDevice::kAuto);
  o.placement.num_gpu_experts = 32;
  o.read_into_memory = true;
  Result<std::unique_ptr<Engine>> read = Engine::create(o);
  REQUIRE(read.ok());
  CHECK((*read)->gpu().dense_on_gpu);
  const auto on_read = greedy_batch(**read, 12);
  o.read_into_memory = false;
  Result<std::unique_ptr<Engine>> mapped = Engine::create(o);
  REQUIRE(mapped.ok());
  CHECK(greedy_batch(**mapped, 12) == on_read);
}

TEST_CASE("[cuda] gpt-oss's dense parts on the GPU: the start-up self-check passes and it serves",
          "[engine][gpu][cuda][gpt-oss]") {
  // The scheduler's pool holds the full layers; the mirror holds every layer (windows on the
  // device). The self-check compares the GPU's probe logits with the CPU's at start-up.
  if (visible_devices() == 0) {
    WARN("no CUDA device: [cuda] case skipped");
    return;
  }
  EngineOptions o = demo_options(DenseDevice::kGpu);
  o.model_path = std::string(TANDEM_SHARED_DIR) + "/data/tiny-gpt-oss/tiny-gpt-oss-q8_0.gguf";
  if (!std::filesystem::exists(o.model_path)) {
    WARN(o.model_path << " is not here (not carried to this machine): case skipped");
    return;
  }
  o.placement.num_gpu_experts = 8;
  Result<std::unique_ptr<Engine>> gpu = Engine::create(o);
  INFO((gpu.ok() ? "" : gpu.status().to_string()));
  REQUIRE(gpu.ok());
  CHECK((*gpu)->gpu().dense_on_gpu);
  CHECK((*gpu)->gpu().allocated.kv > 0);
  // MXFP4 experts with float biases: the plan counts what the worker allocates for them.
  CHECK((*gpu)->gpu().allocated.n_experts == 8);
  CHECK((*gpu)->gpu().allocated.experts == (*gpu)->gpu().planned.experts);
  const auto tokens = greedy_batch(**gpu, 12);
  REQUIRE(tokens.size() == 3);
  for (const auto& t : tokens) CHECK(t.size() == 12);
}

}  // namespace
}  // namespace tandem::engine
