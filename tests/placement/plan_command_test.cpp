// Tests of `tandem plan` through plan_main: JSON output, budget with a model, heat map, errors.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/plan_command.h"
#include "engine/model/model.h"
#include "engine/placement/model_identity.h"
#include "engine/placement/stats_file.h"

namespace tandem::cli {
namespace {

using nlohmann::json;

const std::string kTinyQ8 = std::string(TANDEM_SHARED_DIR) + "/data/tiny-moe/tiny-moe-q8_0.gguf";
const std::string kTinyF32 = std::string(TANDEM_SHARED_DIR) + "/data/tiny-moe/tiny-moe-f32.gguf";

struct Run {
  int rc;
  std::string out;
  std::string err;
};

Run plan(std::vector<std::string> args) {
  Run r;
  r.rc = plan_main(args, r.out, r.err);
  return r;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("tandem_plan_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string write(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

const char* kKtExample = "[[0.1, 0.5, 0.3, 0.8], [0.2, 0.4, 0.9, 0.1]]";

TEST_CASE("plan: KTransformers' example from a plain table, --json", "[placement]") {
  const std::string path = write("kt.json", kKtExample);
  Run r = plan({"--stats", path, "--num-gpu-experts", "3", "--json"});
  REQUIRE(r.rc == 0);
  const json j = json::parse(r.out);
  CHECK(j["gpu_experts"] == json::parse("[[0, 1], [0, 3], [1, 2]]"));
  CHECK(j["coverage"].get<double>() == Approx(2.2 / 3.3));
  CHECK(j["layers"][0]["n_gpu_experts"] == 2);
  CHECK(j["layers"][1]["n_gpu_experts"] == 1);
  CHECK(j["policy"] == "frequency");
  CHECK(j["stats"]["kind"] == "json-table");
  for (const auto& [k, n] :
       std::vector<std::pair<std::string, size_t>>{{"0", 0}, {"8", 8}, {"100", 8}, {"-5", 0}}) {
    Run rk = plan({"--stats", path, "--num-gpu-experts=" + k, "--json"});
    REQUIRE(rk.rc == 0);
    CHECK(json::parse(rk.out)["gpu_experts"].size() == n);
  }
  // Identical across runs.
  CHECK(plan({"--stats", path, "--num-gpu-experts", "3", "--json"}).out == r.out);
  // The table form.
  Run t = plan({"--stats", path, "--num-gpu-experts", "3"});
  REQUIRE(t.rc == 0);
  CHECK_THAT(t.out, Catch::Contains("3 of 8 experts on the GPU"));
  CHECK_THAT(t.out, Catch::Contains("coverage: 66.67%"));
  std::filesystem::remove(path);
}

TEST_CASE("plan: uniform policy and CSV input", "[placement]") {
  const std::string path = write("kt.csv", "0.1,0.5,0.3,0.8\n0.2,0.4,0.9,0.1\n");
  Run r = plan({"--stats", path, "--num-gpu-experts", "3", "--policy", "uniform", "--json"});
  REQUIRE(r.rc == 0);
  CHECK(json::parse(r.out)["gpu_experts"] == json::parse("[[0, 1], [0, 3], [1, 2]]"));
  Run r4 = plan({"--stats", path, "--num-gpu-experts", "4", "--policy", "uniform", "--json"});
  CHECK(json::parse(r4.out)["gpu_experts"] == json::parse("[[0, 1], [0, 3], [1, 1], [1, 2]]"));
  std::filesystem::remove(path);
}

TEST_CASE("plan: budget with a model uses its expert sizes", "[placement]") {
  Result<model::Checkpoint> c = model::open_model(kTinyQ8);
  REQUIRE(c.ok());
  placement::ActivationStats stats =
      placement::ActivationStats::create(placement::model_identity(*c).value()).value();
  for (uint64_t e = 0; e < 8; ++e) stats.add(0, e, 10 + e);  // layer 0: expert 7 most used
  stats.add(1, 2, 100);
  stats.add_tokens(50);
  const std::string path = temp_path("q8_stats.json");
  REQUIRE(placement::save_stats(stats, path).ok());
  const uint64_t per_expert = 3 * 2176;  // Q8_0, three 32 x 64 matrices
  // On the GPU expert worker each matrix starts 256-byte aligned: 3 * 2304 bytes an expert.
  const uint64_t per_expert_device = 3 * 2304;
  // Everything but experts, as gguf-py counted it (tests/fixtures/model/tiny_moe_q8_0.json).
  const uint64_t dense = 415128 - 6 * 17408;
  // Room for four experts as stored but only three as the GPU holds them (4 * 6528 + 100 <
  // 4 * 6912): the plan counts device bytes.
  const uint64_t budget = dense + 1000 + 0 + 4 * per_expert + 100;
  Run r = plan({"--stats", path, "--gpu-memory", std::to_string(budget), "--model", kTinyQ8,
                "--kv-cache", "1000", "--scratch", "0", "--json"});
  REQUIRE(r.rc == 0);
  INFO(r.err);
  const json j = json::parse(r.out);
  CHECK(j["policy"] == "budget");
  CHECK(j["gpu_experts"] == json::parse("[[0, 6], [0, 7], [1, 2]]"));
  CHECK(j["gpu_expert_bytes"] == 3 * per_expert_device);
  CHECK(j["cpu_expert_bytes"] == 13 * per_expert);
  CHECK(j["gpu_reserved_bytes"] == dense + 1000);
  CHECK(j["stats"]["tokens"] == 50);
  CHECK(j["layers"][0]["gpu_bytes"] == 2 * per_expert_device);

  // The same statistics checked against another model are refused.
  Run other = plan({"--stats", path, "--num-gpu-experts", "2", "--model", kTinyF32});
  CHECK(other.rc == 2);
  CHECK_THAT(other.err, Catch::Contains("fingerprint is"));
  std::filesystem::remove(path);
}

TEST_CASE("plan: --heatmap writes an SVG with the GPU experts outlined", "[placement]") {
  const std::string path = write("heat.json", kKtExample);
  const std::string svg_path = temp_path("heat.svg");
  Run r = plan({"--stats", path, "--num-gpu-experts", "3", "--heatmap", svg_path});
  REQUIRE(r.rc == 0);
  std::ifstream in(svg_path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string svg = ss.str();
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK_THAT(svg, Catch::Contains("</svg>"));
  // 8 cells (each with a tooltip) and 3 outlines.
  size_t cells = 0;
  for (size_t at = svg.find("<title>layer"); at != std::string::npos;
       at = svg.find("<title>layer", at + 1)) {
    ++cells;
  }
  CHECK(cells == 8);
  const size_t outlines_at = svg.find("stroke=\"#ff2020\" stroke-width");
  REQUIRE(outlines_at != std::string::npos);
  const std::string outlines = svg.substr(outlines_at, svg.find("</g>", outlines_at) - outlines_at);
  size_t rects = 0;
  for (size_t at = outlines.find("<rect"); at != std::string::npos;
       at = outlines.find("<rect", at + 1)) {
    ++rects;
  }
  CHECK(rects == 3);
  CHECK_THAT(svg, Catch::Contains("layer 1, expert 2: 0.9"));
  std::filesystem::remove(path);
  std::filesystem::remove(svg_path);
}

TEST_CASE("plan: usage errors and bad input exit 2 with a message", "[placement]") {
  const std::string path = write("bad_usage.json", kKtExample);
  auto fails = [](std::vector<std::string> args, const std::string& message) {
    Run r = plan(std::move(args));
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Catch::Contains(message));
  };
  fails({"--stats", path}, "give --num-gpu-experts K or --gpu-memory BYTES");
  fails({"--stats", path, "--gpu-memory", "1GiB"}, "--gpu-memory needs --model");
  fails({"--stats", path, "--num-gpu-experts", "2", "--gpu-memory", "1GiB"}, "not both");
  fails({"--stats", path, "--num-gpu-experts", "x"}, "--num-gpu-experts");
  fails({"--stats", path, "--num-gpu-experts", "2", "--policy", "random"}, "unknown policy");
  fails({"--stats", path, "--num-gpu-experts", "2", "--policy", "budget"},
        "--policy budget needs --gpu-memory");
  fails({"--stats", path, "--num-gpu-experts", "2", "--bogus"}, "unknown argument");
  fails({"--stats", path, "--num-gpu-experts", "2", "--heatmap", "x.png"}, "must end in .svg");
  fails({"--num-gpu-experts", "2"}, "give --stats");
  fails({"--stats", temp_path("missing.json"), "--num-gpu-experts", "2"}, "missing.json");
  const std::string bad = write("negative.json", "[[1, -1]]");
  fails({"--stats", bad, "--num-gpu-experts", "1"}, "row 0, column 1: -1 is negative");
  fails({"--stats", path, "--num-gpu-experts", "1", "--model", kTinyQ8},
        "the table has 4 columns, the model has 8 experts per layer");
  Run help = plan({"--help"});
  CHECK(help.rc == 0);
  CHECK_THAT(help.out, Catch::Contains("usage: tandem plan"));
  std::filesystem::remove(path);
  std::filesystem::remove(bad);
}

TEST_CASE("plan: a model without statistics falls back to uniform", "[placement]") {
  Run r = plan({"--model", kTinyQ8, "--num-gpu-experts", "3", "--json"});
  REQUIRE(r.rc == 0);
  const json j = json::parse(r.out);
  CHECK(j["fell_back_to_uniform"] == true);
  CHECK(j["policy_used"] == "uniform");
  CHECK(j["gpu_experts"] == json::parse("[[0, 0], [0, 1], [1, 0]]"));
  CHECK(j["coverage"].is_null());
}

}  // namespace
}  // namespace tandem::cli
