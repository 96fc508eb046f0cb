// Tests of tandemd's model start: the demo model opens and its shipped statistics give the
// placement that `tandem plan` computes from the same file; errors name what is wrong.
#include "server/model_startup.h"

#include <catch2/catch.hpp>
#include <string>

namespace tandem::server {
namespace {

config::Config demo_config() {
  config::Config c;
  c.model.path = std::string(TANDEM_SOURCE_DIR) + "/models/demo/demo-moe-q8_0.gguf";
  c.placement.stats_path = std::string(TANDEM_SOURCE_DIR) + "/models/demo/activation-stats.json";
  c.placement.num_gpu_experts = 16;
  return c;
}

TEST_CASE("start_model opens the demo model and plans from its statistics", "[server]") {
  const Result<StartedModel> started = start_model(demo_config());
  REQUIRE(started.ok());
  REQUIRE(started->checkpoint.spec.has_value());
  CHECK(started->checkpoint.spec->n_experts == 16);
  const placement::PlacementReport& report = started->placement.report;
  CHECK(report.n_gpu_experts == 16);
  CHECK(report.n_total_experts == 64);
  CHECK_FALSE(report.fell_back_to_uniform);
  REQUIRE(report.coverage.has_value());
  // 16 of 64 experts chosen by frequency must cover far more than the 25% of a random pick;
  // `tandem plan --stats models/demo/activation-stats.json --num-gpu-experts 16` reports 66.01%.
  CHECK(*report.coverage == Approx(0.6601).margin(5e-5));
}

TEST_CASE("start_model without statistics falls back to uniform with a warning", "[server]") {
  config::Config c = demo_config();
  c.placement.stats_path.clear();
  const Result<StartedModel> started = start_model(c);
  REQUIRE(started.ok());
  CHECK(started->placement.report.fell_back_to_uniform);
  for (const placement::LayerPlacement& layer : started->placement.report.layers) {
    CHECK(layer.gpu_experts.size() == 4);  // 16 experts over 4 layers
  }
}

TEST_CASE("start_model refuses a missing model, statistics of another model", "[server]") {
  config::Config none;
  const Result<StartedModel> no_model = start_model(none);
  REQUIRE_FALSE(no_model.ok());
  CHECK(no_model.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(no_model.status().message(), Catch::Contains("model.path"));

  config::Config other = demo_config();
  other.model.path = std::string(TANDEM_SOURCE_DIR) + "/models/demo/demo-moe-f32.gguf";
  const Result<StartedModel> mismatch = start_model(other);
  REQUIRE_FALSE(mismatch.ok());
  CHECK_THAT(mismatch.status().message(), Catch::Contains("activation-stats.json"));
  CHECK_THAT(mismatch.status().message(), Catch::Contains("fingerprint"));
}

TEST_CASE("model.context_length above the model's is refused naming both numbers", "[server]") {
  config::Config c = demo_config();
  c.model.context_length = 100000;
  const Result<StartedModel> too_long = start_model(c);
  REQUIRE_FALSE(too_long.ok());
  CHECK(too_long.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(too_long.status().message(), Catch::Contains("model.context_length 100000") &&
                                              Catch::Contains("512 tokens") &&
                                              Catch::Contains("demo-moe-q8_0.gguf"));
  // The model's own length, less, or 0 (the model's) are fine.
  for (const int n : {512, 100, 0}) {
    c.model.context_length = n;
    CHECK(start_model(c).ok());
  }
}

TEST_CASE("check_context_length", "[server]") {
  CHECK(check_context_length(0, 512, "m.gguf").ok());
  CHECK(check_context_length(512, 512, "m.gguf").ok());
  CHECK(check_context_length(8192, 0, "m.gguf").ok());  // the model declares no length
  const Status over = check_context_length(513, 512, "m.gguf");
  CHECK(over.code() == StatusCode::kInvalidArgument);
  CHECK(over.message() ==
        "model.context_length 513 is larger than the 512 tokens of context that m.gguf declares; "
        "set it to at most 512, or 0 for the model's own");
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

}  // namespace
}  // namespace tandem::server
