// fit_probe_to_model and cuda_dense_unsupported_tensor: where the dense parts of a model can run,
// decided from the checkpoint alone (no device needed: the probe is made up).
#include "engine/facade/gpu_plan.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "engine/runtime/dense_device_plan.h"
#include "engine/runtime/scheduler.h"

namespace tandem::engine {
namespace {

const std::string kShared = std::string(TANDEM_SHARED_DIR) + "/data/";

// A probe that found a device and chose it for the dense parts.
GpuProbe device_probe() {
  GpuProbe probe;
  probe.backend_built = true;
  probe.n_devices = 1;
  probe.label = "device 0 (test)";
  probe.free_bytes = uint64_t{1} << 34;
  probe.dense_on_gpu = true;
  return probe;
}

EngineOptions options_for(DenseDevice dense) {
  EngineOptions o;
  o.dense_device = dense;
  return o;
}

TEST_CASE("fit_probe_to_model keeps the GPU for a model its kernels run, and says why not",
          "[engine][gpu]") {
  for (const char* file : {"tiny-moe/tiny-moe-q8_0.gguf", "tiny-gpt-oss/tiny-gpt-oss-q8_0.gguf",
                           "tiny-deepseek2/tiny-deepseek2-q4_k_m.gguf",
                           "tiny-deepseek2/tiny-deepseek2-legacy-f32.gguf"}) {
    INFO(file);
    Result<model::Checkpoint> c = model::open_model(kShared + file);
    REQUIRE(c.ok());
    const Result<GpuProbe> p =
        fit_probe_to_model(options_for(DenseDevice::kAuto), *c, device_probe());
    REQUIRE(p.ok());
    CHECK(p->dense_on_gpu);
  }
  // A model the device attention cannot address (every layer windowed: no block table): the CPU
  // with auto, a refusal naming it with gpu.
  Result<model::Checkpoint> ds = model::open_model(kShared + "tiny-gpt-oss/tiny-gpt-oss-q8_0.gguf");
  REQUIRE(ds.ok());
  ds->spec->swa_layers.assign(ds->spec->n_layers, true);
  const Result<GpuProbe> cpu =
      fit_probe_to_model(options_for(DenseDevice::kAuto), *ds, device_probe());
  REQUIRE(cpu.ok());
  CHECK_FALSE(cpu->dense_on_gpu);
  const Result<GpuProbe> refused =
      fit_probe_to_model(options_for(DenseDevice::kGpu), *ds, device_probe());
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK(refused.status().message().find("every layer is windowed") != std::string::npos);
  // No GPU chosen: nothing to decide.
  GpuProbe none = device_probe();
  none.dense_on_gpu = false;
  const Result<GpuProbe> unchanged = fit_probe_to_model(options_for(DenseDevice::kAuto), *ds, none);
  REQUIRE(unchanged.ok());
  CHECK_FALSE(unchanged->dense_on_gpu);
}

TEST_CASE("the start-up estimate of the KV mirror covers the scheduler's real pool",
          "[engine][gpu]") {
  // Before the scheduler exists, gpu_fixed_demand works out its pool from runtime.kv_cache_bytes;
  // the mirror the executor then allocates for the real pool is that size: K and V of every layer
  // (tiny-moe), the full layers' blocks for every layer (gpt-oss, whose window rings come out of
  // the budget first), the latent rows alone (MLA); in runtime.kv_cache_type's elements.
  for (const char* file : {"tiny-moe/tiny-moe-f32.gguf", "tiny-gpt-oss/tiny-gpt-oss-f32.gguf",
                           "tiny-deepseek2/tiny-deepseek2-f32.gguf"}) {
    for (const kernels::KvType type : {kernels::KvType::kF32, kernels::KvType::kF16}) {
      INFO(file << ", KV " << kernels::kv_type_name(type));
      Result<model::Checkpoint> c = model::open_model(kShared + file);
      REQUIRE(c.ok());
      EngineOptions o = options_for(DenseDevice::kGpu);
      o.kv_cache_bytes = uint64_t{48} << 20;
      o.kv_cache_type = type;
      const Result<placement::GpuMemoryDemand> guess =
          gpu_fixed_demand(o, *c, device_probe(), false);
      INFO((guess.ok() ? "" : guess.status().to_string()));
      REQUIRE(guess.ok());

      runtime::RunnerOptions ro;
      ro.kv_type = type;  // as Engine::create sets it
      auto runner = runtime::ModelRunner::create(*c->spec, *c->weights, ro);
      REQUIRE(runner.ok());
      runtime::SchedulerOptions so;
      so.limits = o.limits;
      so.limits.context_length = static_cast<int64_t>((*runner)->context_length());
      so.kv_budget_bytes = static_cast<int64_t>(o.kv_cache_bytes);
      auto scheduler = runtime::Scheduler::create(std::move(runner).value(), so);
      REQUIRE(scheduler.ok());
      const runtime::KvPool& pool = (*scheduler)->kv_pool();
      const size_t tokens = static_cast<size_t>(std::max<int64_t>(1, o.limits.max_batch_tokens));
      REQUIRE(pool.type() == type);
      // gpt-oss: the windowed layers in rings, one per running sequence, beside the mirror of
      // the pool's full layers.
      const runtime::KvLayerLayout& layout = (*scheduler)->runner().kv_layout();
      const runtime::DeviceWindowRings rings =
          runtime::device_window_rings(layout, so.limits, pool.block_tokens());
      CHECK((rings.slots > 0) == (layout.n_windowed() > 0));
      const auto real =
          runtime::estimate_cuda_dense_bytes(*c->spec, *c->weights,
                                             {pool.n_layers(), pool.kv_dim(), pool.block_tokens(),
                                              pool.n_blocks(), pool.type(), rings},
                                             tokens);
      REQUIRE(real.ok());
      CHECK(guess->kv == real->kv);
      CHECK(guess->dense == real->dense_weights);
      const uint64_t ring_bytes = 2 * layout.n_windowed() * rings.slots * rings.blocks *
                                  pool.block_tokens() * pool.kv_dim() *
                                  kernels::kv_type_bytes(type);
      CHECK(real->kv == pool.bytes() + ring_bytes);
    }
  }
}

TEST_CASE("cuda_dense_unsupported_tensor names the first matrix the CUDA kernels cannot take",
          "[engine][gpu]") {
  Result<model::Checkpoint> c = model::open_model(kShared + "tiny-moe/tiny-moe-q8_0.gguf");
  REQUIRE(c.ok());
  const model::ModelSpec& spec = *c->spec;
  Result<runtime::DenseDevicePlan> plan =
      runtime::plan_dense_device(spec, *c->weights, {spec.n_layers, spec.kv_dim(), 16, 1}, 8);
  REQUIRE(plan.ok());
  CHECK(runtime::cuda_dense_unsupported_tensor(*plan).empty());
  runtime::DeviceUpload* matrix = nullptr;
  for (runtime::DeviceUpload& u : plan->uploads) {
    if (u.matrix && u.type == TensorType::kQ8_0) {
      matrix = &u;
      break;
    }
  }
  REQUIRE(matrix != nullptr);
  const std::string name = matrix->name;
  matrix->type = TensorType::kIQ2_XXS;  // a type the CPU runs and the CUDA kernels do not
  std::string why = runtime::cuda_dense_unsupported_tensor(*plan);
  CHECK(why.find("'" + name + "'") != std::string::npos);
  CHECK(why.find("iq2_xxs") != std::string::npos);
  CHECK(why.find("supported: ") != std::string::npos);
  matrix->type = TensorType::kQ5_0;  // taken, but its rows must be whole 32-element blocks
  matrix->cols = 48;
  why = runtime::cuda_dense_unsupported_tensor(*plan);
  CHECK(why.find("'" + name + "'") != std::string::npos);
  CHECK(why.find("multiple of 32") != std::string::npos);
}

}  // namespace
}  // namespace tandem::engine
