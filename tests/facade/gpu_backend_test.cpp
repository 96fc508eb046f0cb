// The GPU backend interface in this build: without a backend every GPU object is refused by name
// (and the engine never asks for one); with the CUDA backend the device listing answers.
#include "engine/gpu/gpu_backend.h"

#include <catch2/catch.hpp>

#include <string>

#include "engine/model/checkpoint.h"
#include "engine/runtime/paged_kv_cache.h"

namespace tandem::gpu {
namespace {

TEST_CASE("the GPU backend of this build answers for itself", "[engine][gpu]") {
  const Result<std::vector<DeviceInfo>> devices = list_devices();
  if (backend_built()) {
    CHECK(backend_name() == "CUDA");
    // Without a driver the listing is an error naming it; with one, a list (maybe empty).
    if (!devices.ok()) CHECK(devices.status().code() == StatusCode::kUnavailable);
    return;
  }
  CHECK(backend_name().empty());
  REQUIRE(devices.ok());
  CHECK(devices->empty());
  CHECK(device_memory(0).status().code() == StatusCode::kUnimplemented);
  CHECK(expert_scratch_bytes(64, 128, 16, 2, 8) == 0);

  Result<model::Checkpoint> checkpoint =
      model::open_model(std::string(TANDEM_SOURCE_DIR) + "/models/demo/demo-moe-q8_0.gguf");
  REQUIRE(checkpoint.ok());
  const model::ModelSpec& spec = *checkpoint->spec;
  const Result<GpuExperts> experts = create_expert_worker(
      spec, *checkpoint->weights,
      experts::ExpertMap::uniform(checkpoint->weights->layers.size(), spec.n_experts, 1), {});
  REQUIRE(experts.status().code() == StatusCode::kUnimplemented);
  CHECK_THAT(experts.status().message(), Catch::Contains("GPU experts") &&
                                             Catch::Contains("no GPU backend") &&
                                             Catch::Contains("-DTANDEM_CUDA=ON"));
  Result<std::unique_ptr<runtime::KvPool>> pool =
      runtime::KvPool::create(spec.n_layers, spec.kv_dim(), 16, 4);
  REQUIRE(pool.ok());
  const Result<GpuDense> dense =
      create_dense_executor(spec, *checkpoint->weights, **pool, {.max_batch_tokens = 16});
  REQUIRE(dense.status().code() == StatusCode::kUnimplemented);
  CHECK_THAT(dense.status().message(), Catch::Contains("dense parts on the GPU"));
}

}  // namespace
}  // namespace tandem::gpu
