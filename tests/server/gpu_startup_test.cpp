// tandemd's startup rule for GPU experts: a placement with GPU experts and no CUDA device is a
// clear error naming the count; no GPU experts, or a device present, is fine.
#include <catch2/catch.hpp>
#include <string>

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
