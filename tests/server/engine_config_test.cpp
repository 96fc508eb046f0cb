// Tests of tandemd's configuration -> EngineOptions conversion, model.format, and the exit code of
// an engine start-up failure.
#include "server/engine_config.h"

#include <catch2/catch.hpp>

#include <string>

#include "engine/model/gguf_split.h"
#include "server/exit_codes.h"

namespace tandem::server {
namespace {

TEST_CASE("engine_options carries every engine setting of the configuration", "[server]") {
  config::Config c;
  c.model.path = "/models/m.gguf";
  c.model.load_mode = config::LoadMode::kRead;
  c.model.context_length = 1024;
  c.model.tokenizer_dir = "/tok";
  c.placement.policy = config::PlacementPolicy::kBudget;
  c.placement.num_gpu_experts = 7;
  c.placement.gpu_memory_budget = 123;
  c.placement.stats_path = "/stats.json";
  c.runtime.dense_device = config::DenseDevice::kGpu;
  c.runtime.cuda_device = 2;
  c.runtime.threads = 3;
  c.runtime.max_batch_tokens = 99;
  c.runtime.prefill_chunk_tokens = 33;
  c.runtime.kv_cache_bytes = 4096;
  c.runtime.prefix_caching = false;
  c.runtime.repack_weights = false;
  c.runtime.numa = false;
  c.server.max_running_requests = 5;
  c.server.max_queued_requests = 6;
  const engine::EngineOptions o = engine_options(c);
  CHECK(o.model_path == "/models/m.gguf");
  CHECK(o.read_into_memory);
  CHECK(o.context_length == 1024);
  CHECK(o.tokenizer_dir == "/tok");
  CHECK(o.export_tokenizer);
  CHECK(o.placement.policy == placement::PlacementPolicy::kBudget);
  CHECK(o.placement.num_gpu_experts == 7);
  CHECK(o.gpu_memory_budget == 123);
  CHECK(o.placement.stats_path == "/stats.json");
  CHECK(o.dense_device == engine::DenseDevice::kGpu);
  CHECK(o.gpu_device == 2);
  CHECK(o.threads == 3);
  CHECK(o.limits.max_batch_tokens == 99);
  CHECK(o.limits.prefill_chunk_tokens == 33);
  CHECK(o.limits.max_running == 5);
  CHECK(o.kv_cache_bytes == 4096);
  CHECK_FALSE(o.prefix_caching);
  CHECK_FALSE(o.repack_weights);
  CHECK_FALSE(o.numa);
  CHECK(o.queue_capacity == 11);  // waiting beyond a full batch, plus the batch
  CHECK(o.watch_files);
  c.runtime.dense_device = config::DenseDevice::kAuto;
  CHECK(engine_options(c).dense_device == engine::DenseDevice::kAuto);
  c.runtime.dense_device = config::DenseDevice::kCpu;
  CHECK(engine_options(c).dense_device == engine::DenseDevice::kCpu);
  c.model.load_mode = config::LoadMode::kMmap;
  CHECK_FALSE(engine_options(c).read_into_memory);
}

TEST_CASE("check_model_format", "[server]") {
  const std::string gguf = std::string(TANDEM_SOURCE_DIR) + "/models/demo/demo-moe-q8_0.gguf";
  const std::string hf = std::string(TANDEM_SOURCE_DIR) + "/models/demo/hf";
  CHECK(check_model_format(config::ModelFormat::kAuto, gguf).ok());
  CHECK(check_model_format(config::ModelFormat::kGguf, gguf).ok());
  CHECK(check_model_format(config::ModelFormat::kSafetensors, hf).ok());
  const Status st = check_model_format(config::ModelFormat::kSafetensors, gguf);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "model.format is safetensors but " + gguf +
                            " is a GGUF file (it starts with the GGUF magic); set model.format "
                            "to auto or gguf");
  const Status dir = check_model_format(config::ModelFormat::kGguf, hf);
  CHECK(dir.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(dir.message(), Catch::Contains("model.format is gguf but " + hf + " is not a GGUF"));
  CHECK(check_model_format(config::ModelFormat::kGguf, hf + "/missing").code() ==
        StatusCode::kNotFound);
}

TEST_CASE("served_model_info names the model as clients see it", "[server]") {
  config::Config c;
  c.model.path = std::string(TANDEM_SOURCE_DIR) + "/models/demo/demo-moe-q8_0.gguf";
  c.runtime.threads = 1;
  c.runtime.dense_device = config::DenseDevice::kCpu;
  c.model.tokenizer_dir.clear();
  const Result<std::unique_ptr<engine::Engine>> engine = engine::Engine::create(engine_options(c));
  REQUIRE(engine.ok());
  const ServedModelInfo info = served_model_info(c, **engine);
  CHECK(info.served_model_name == "demo-moe-q8_0");
  CHECK(info.model_type == "qwen3_moe");
  CHECK(info.context_length == 512);
  CHECK_FALSE(info.tokenizer_path.empty());  // exported into a private directory
  CHECK(info.eos_token_ids == (*engine)->facts().eos_token_ids);
  c.model.served_name = "bible";
  CHECK(served_model_info(c, **engine).served_model_name == "bible");
}

TEST_CASE("a split GGUF starts from its first shard and serves under the model's name",
          "[server][split]") {
  config::Config c;
  c.model.path = std::string(TANDEM_SOURCE_DIR) +
                 "/tests/fixtures/gguf/split/tiny-moe-q8_0-00001-of-00003.gguf";
  c.runtime.threads = 1;
  c.runtime.dense_device = config::DenseDevice::kCpu;
  c.model.tokenizer_dir.clear();
  const Result<std::unique_ptr<engine::Engine>> engine = engine::Engine::create(engine_options(c));
  REQUIRE(engine.ok());
  CHECK(served_model_info(c, **engine).served_model_name == "tiny-moe-q8_0");
  CHECK(model::strip_gguf_shard_suffix("DeepSeek-V3-Q4_K_M-00001-of-00009") ==
        "DeepSeek-V3-Q4_K_M");
  CHECK(model::strip_gguf_shard_suffix("m-1-of-2") == "m-1-of-2");  // not a shard's ending
  CHECK(model::strip_gguf_shard_suffix("00001-of-00009") == "00001-of-00009");
  // A later shard is a bad model, named as such, and the first shard is named in the error.
  c.model.path = std::string(TANDEM_SOURCE_DIR) +
                 "/tests/fixtures/gguf/split/tiny-moe-q8_0-00003-of-00003.gguf";
  engine::EngineStage stage = engine::EngineStage::kDevices;
  const Result<std::unique_ptr<engine::Engine>> later =
      engine::Engine::create(engine_options(c), &stage);
  REQUIRE_FALSE(later.ok());
  CHECK(engine_exit_code(later.status(), stage) == kExitBadModel);
  CHECK_THAT(later.status().message(), Catch::Contains("tiny-moe-q8_0-00001-of-00003.gguf"));
}

TEST_CASE("engine_exit_code: device failures may pass, model failures are permanent", "[server]") {
  const Status bad = invalid_argument_error("x");
  CHECK(engine_exit_code(bad, engine::EngineStage::kDevices) == kExitFailure);
  CHECK(engine_exit_code(bad, engine::EngineStage::kCheckpoint) == kExitBadModel);
  CHECK(engine_exit_code(bad, engine::EngineStage::kEngine) == kExitBadModel);
  const Status memory = resource_exhausted_error("x");
  CHECK(engine_exit_code(memory, engine::EngineStage::kCheckpoint) == kExitBadModel);
  CHECK(engine_exit_code(memory, engine::EngineStage::kEngine) == kExitFailure);
}

}  // namespace
}  // namespace tandem::server
