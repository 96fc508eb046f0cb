// The start-up GPU self-check: relative_error, check_probe's verdict and message, and run_probe
// through a runner with a dense executor (the host test double standing in for the GPU: its
// logits equal the CPU path's bit for bit, so the probe must measure exactly 0).
#include "engine/facade/gpu_self_check.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/checkpoint.h"
#include "tests/runtime/host_dense_executor.h"
#include "tests/runtime/paged_pool.h"

namespace tandem::engine {
namespace {

const std::string kDemo = std::string(TANDEM_SOURCE_DIR) + "/models/demo/demo-moe-q8_0.gguf";
// Sliding-window layers: the scheduler's pool holds the full layers only.
const std::string kTinyGptOss =
    std::string(TANDEM_SHARED_DIR) + "/data/tiny-gpt-oss/tiny-gpt-oss-all-f32.gguf";

struct LoadedRunner {
  model::Checkpoint checkpoint;
  std::unique_ptr<runtime::ModelRunner> runner;
};

LoadedRunner open_runner(const std::string& path) {
  Result<model::Checkpoint> checkpoint = model::open_model(path);
  REQUIRE(checkpoint.ok());
  Result<std::unique_ptr<runtime::ModelRunner>> runner =
      runtime::ModelRunner::create(*checkpoint->spec, *checkpoint->weights, {});
  REQUIRE(runner.ok());
  return {std::move(*checkpoint), std::move(*runner)};
}

TEST_CASE("relative_error is the relative L2 distance, infinite for non-finite values",
          "[engine][gpu][self_check]") {
  const std::vector<float> want{3.0f, 4.0f};
  CHECK(relative_error(want, want) == 0.0);
  CHECK(relative_error(want, std::vector<float>{3.0f, 4.5f}) == Approx(0.1));
  CHECK(relative_error(want, std::vector<float>{3.0f}) == std::numeric_limits<double>::infinity());
  CHECK(relative_error(want, std::vector<float>{3.0f, std::nanf("")}) ==
        std::numeric_limits<double>::infinity());
  CHECK(relative_error(want, std::vector<float>{3.0f, INFINITY}) ==
        std::numeric_limits<double>::infinity());
  CHECK(relative_error(std::vector<float>{0.0f}, std::vector<float>{1.0f}) ==
        std::numeric_limits<double>::infinity());
  CHECK(relative_error(std::vector<float>{}, std::vector<float>{}) == 0.0);
}

TEST_CASE("check_probe accepts rounding and refuses a wrong GPU path, saying what to turn off",
          "[engine][gpu][self_check]") {
  const std::vector<float> cpu{1.0f, -2.0f, 3.0f, 0.5f};
  std::vector<float> close = cpu;
  close[2] += 0.01f;  // 0.26 % relative
  CHECK(check_probe(cpu, close, "16 experts").ok());
  std::vector<float> wrong = cpu;
  wrong[1] = 2.0f;
  const Status refused = check_probe(cpu, wrong, "16 experts and the dense parts");
  REQUIRE(refused.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(refused.message(), Catch::Contains("GPU self-check failed"));
  CHECK_THAT(refused.message(), Catch::Contains("16 experts and the dense parts"));
  CHECK_THAT(refused.message(), Catch::Contains("runtime.dense_device: cpu"));
  CHECK_THAT(refused.message(), Catch::Contains("placement.num_gpu_experts: 0"));
  std::vector<float> nan = cpu;
  nan[0] = std::nanf("");
  CHECK_FALSE(check_probe(cpu, nan, "x").ok());
}

TEST_CASE("run_probe through a dense executor on a borrowed pool matches the CPU exactly",
          "[engine][gpu][self_check]") {
  const LoadedRunner loaded = open_runner(kDemo);
  runtime::ModelRunner& r = *loaded.runner;

  const Result<std::vector<float>> cpu = run_probe(r, nullptr);
  REQUIRE(cpu.ok());
  REQUIRE(cpu->size() == kProbeTokens * r.n_vocab());
  const Result<std::vector<float>> again = run_probe(r, nullptr);
  REQUIRE(again.ok());
  CHECK(relative_error(*cpu, *again) == 0.0);

  // A pool of 3-position blocks, as the scheduler's would be before it admits anything.
  runtime::testing::PagedPool pool = runtime::testing::make_pool(r, 3, 64);
  auto executor = std::make_unique<runtime::testing::HostDenseExecutor>(
      r.spec(), r.prepared_weights(), *pool.pool, kernels::MatmulActivations::kQuantized, 64);
  runtime::testing::HostDenseExecutor* host = executor.get();
  REQUIRE(r.set_dense_executor(std::move(executor)).ok());
  const Result<std::vector<float>> dense = run_probe(r, pool.pool.get());
  REQUIRE(dense.ok());
  CHECK(host->passes == 1);
  CHECK(relative_error(*cpu, *dense) == 0.0);
  CHECK(check_probe(*cpu, *dense, "the dense parts").ok());

  // The executor refuses a private dense cache, and its errors reach the caller.
  CHECK(run_probe(r, nullptr).status().code() == StatusCode::kInvalidArgument);
  host->fail_at = "begin";
  CHECK(run_probe(r, pool.pool.get()).status().code() == StatusCode::kInternal);
  REQUIRE(r.set_dense_executor(nullptr).ok());
}

TEST_CASE(
    "run_probe on a scheduler's pool of a model with windows wraps its cache as the "
    "scheduler does",
    "[engine][gpu][self_check][gpt-oss]") {
  const LoadedRunner loaded = open_runner(kTinyGptOss);
  runtime::ModelRunner& r = *loaded.runner;
  REQUIRE(r.kv_layout().n_windowed() > 0);
  const Result<std::vector<float>> cpu = run_probe(r, nullptr);
  REQUIRE(cpu.ok());
  runtime::testing::PagedPool pool = runtime::testing::make_full_layer_pool(r, 16, 16);
  auto executor = std::make_unique<runtime::testing::HostDenseExecutor>(
      r.spec(), r.prepared_weights(), *pool.pool, kernels::MatmulActivations::kQuantized, 64);
  REQUIRE(r.set_dense_executor(std::move(executor)).ok());
  const Result<std::vector<float>> dense = run_probe(r, pool.pool.get());
  INFO((dense.ok() ? "" : dense.status().to_string()));
  REQUIRE(dense.ok());
  CHECK(relative_error(*cpu, *dense) == 0.0);
  REQUIRE(r.set_dense_executor(nullptr).ok());
}

TEST_CASE(
    "run_probe prefills in the scheduler's chunks, so a device's window rings sized for them "
    "take the probe",
    "[engine][gpu][self_check][gpt-oss]") {
  const LoadedRunner loaded = open_runner(kTinyGptOss);
  runtime::ModelRunner& r = *loaded.runner;
  const size_t pass = 3;  // runtime.prefill_chunk_tokens below the probe's 8 tokens
  const Result<std::vector<float>> cpu = run_probe(r, nullptr, pass);
  REQUIRE(cpu.ok());
  REQUIRE(cpu->size() == kProbeTokens * r.n_vocab());
  // The chunked probe is the same prompt: within rounding of the one-pass probe.
  const Result<std::vector<float>> whole = run_probe(r, nullptr);
  REQUIRE(whole.ok());
  CHECK(relative_error(*whole, *cpu) < 1e-5);

  runtime::testing::PagedPool pool = runtime::testing::make_full_layer_pool(r, 16, 16);
  const runtime::DeviceWindowRings rings{
      2, runtime::device_window_ring_blocks(r.spec().sliding_window, pass, 16), pass};
  auto executor = std::make_unique<runtime::testing::HostDenseExecutor>(
      r.spec(), r.prepared_weights(), *pool.pool, kernels::MatmulActivations::kQuantized, 64,
      rings);
  runtime::testing::HostDenseExecutor* host = executor.get();
  REQUIRE(r.set_dense_executor(std::move(executor)).ok());
  const Result<std::vector<float>> dense = run_probe(r, pool.pool.get(), pass);
  INFO((dense.ok() ? "" : dense.status().to_string()));
  REQUIRE(dense.ok());
  CHECK(host->passes == 3);
  CHECK(relative_error(*cpu, *dense) == 0.0);
  // One 8-token pass is more than these rings take: refused, not computed wrong.
  const Result<std::vector<float>> too_long = run_probe(r, pool.pool.get());
  CHECK_FALSE(too_long.ok());
  CHECK(run_probe(r, pool.pool.get(), 0).status().code() == StatusCode::kInvalidArgument);
  REQUIRE(r.set_dense_executor(nullptr).ok());
}

}  // namespace
}  // namespace tandem::engine
