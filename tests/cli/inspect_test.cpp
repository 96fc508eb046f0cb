// Tests for `tandem inspect`: JSON keys and values against gguf-py's reading of the tiny-moe files
// (tests/fixtures/model/), non-runnable files, malformed and inconsistent files.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/inspect_command.h"

namespace tandem::cli {
namespace {

const std::string kTinyMoe = std::string(TANDEM_SHARED_DIR) + "/data/tiny-moe/";
const std::string kFixtures = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/";

struct Run {
  int rc;
  std::string out;
  std::string err;
};

Run inspect(std::vector<std::string> args) {
  Run r;
  r.rc = inspect_main(args, r.out, r.err);
  return r;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

}  // namespace

TEST_CASE("inspect --json on the tiny-moe GGUF files", "[cli][inspect]") {
  for (const char* variant : {"f32", "q8_0"}) {
    INFO(variant);
    const nlohmann::json ref = read_json(kFixtures + "model/tiny_moe_" + variant + ".json");
    Run r = inspect({kTinyMoe + "tiny-moe-" + variant + ".gguf", "--json"});
    REQUIRE(r.rc == 0);
    CHECK(r.err.empty());
    const nlohmann::json j = nlohmann::json::parse(r.out);
    const nlohmann::json& m = ref["metadata"];
    CHECK(j["architecture"] == "qwen3moe");
    CHECK(j["n_layers"] == m["qwen3moe.block_count"]);
    CHECK(j["n_experts"] == m["qwen3moe.expert_count"]);
    CHECK(j["n_experts_used"] == m["qwen3moe.expert_used_count"]);
    CHECK(j["hidden_size"] == m["qwen3moe.embedding_length"]);
    CHECK(j["vocab_size"] == m["n_vocab_tokens"]);
    CHECK(j["context_length"] == m["qwen3moe.context_length"]);
    CHECK(j["n_tensors"] == ref["n_tensors"]);
    CHECK(j["types"] == ref["types"]);
    // bytes_total is the sum of every tensor's byte size as gguf-py reports it.
    CHECK(j["bytes_total"] == ref["bytes_total"]);
    uint64_t experts = 0;
    uint64_t embeddings = 0;
    uint64_t per_expert_layer0 = 0;
    for (const nlohmann::json& t : ref["tensors"]) {
      const std::string name = t["name"];
      const uint64_t bytes = t["bytes"];
      if (name.find("_exps.") != std::string::npos) {
        experts += bytes;
        if (name.rfind("blk.0.", 0) == 0) per_expert_layer0 += bytes / 8;
      }
      if (name == "token_embd.weight" || name == "output.weight") embeddings += bytes;
    }
    CHECK(j["bytes_experts"] == experts);
    CHECK(j["bytes_embeddings"] == embeddings);
    CHECK(j["bytes_dense"] == ref["bytes_total"].get<uint64_t>() - experts - embeddings);
    CHECK(j["bytes_unused"] == 0);
    CHECK(j["bytes_per_expert_per_layer"][0] == per_expert_layer0);
    CHECK(j["bytes_per_expert"] == 2 * per_expert_layer0);
    CHECK(j["placement"]["all_cpu"]["cpu_bytes"] == ref["bytes_total"]);
    CHECK(j["placement"]["all_cpu"]["gpu_bytes"] == 0);
    CHECK(j["placement"]["all_gpu"]["gpu_bytes"] == ref["bytes_total"]);
    CHECK(j["spec"]["rope"]["type"] == "neox");
    CHECK(j["spec"]["bos_token_id"] == m["tokenizer.ggml.bos_token_id"]);
    CHECK(j["tensors"].size() == ref["tensors"].size());
  }
}

TEST_CASE("inspect text output names the architecture and the byte split", "[cli][inspect]") {
  Run r = inspect({kTinyMoe + "tiny-moe-q8_0.gguf"});
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("architecture:  qwen3moe (tiny-random-qwen3moe)"));
  CHECK_THAT(r.out, Catch::Contains("bytes total:   415128 B"));
  CHECK_THAT(r.out, Catch::Contains("types:         f32 x11, q8_0 x16"));
}

TEST_CASE("inspect lists files that are not runnable models, exit 0", "[cli][inspect]") {
  SECTION("vocab-only GGUF") {
    Run r =
        inspect({std::string(TANDEM_SHARED_DIR) + "/data/vocab/ggml-vocab-qwen2.gguf", "--json"});
    REQUIRE(r.rc == 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    CHECK(j["architecture"] == "unknown");
    CHECK(j["supported"] == false);
    CHECK(j["file_architecture"] == "qwen2");
    CHECK(j["n_tensors"] == 0);
    CHECK(j["bytes_total"] == 0);
    CHECK(j["n_layers"].is_null());
    CHECK(j["metadata"]["tokenizer.ggml.model"] == "STRING \"gpt2\"");
  }
  SECTION("lone safetensors file") {
    Run r = inspect({kFixtures + "hf/qwen2_moe/model.safetensors", "--json"});
    REQUIRE(r.rc == 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    CHECK(j["architecture"] == "unknown");
    CHECK(j["n_tensors"] == 79);
    CHECK(j["types"].value("f32", 0) == 79);
  }
}

TEST_CASE("inspect on HF directories", "[cli][inspect][hf]") {
  Run r = inspect({kFixtures + "hf/mixtral_sharded", "--json"});
  REQUIRE(r.rc == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json ref = read_json(kFixtures + "hf/mixtral_sharded/tensors.json");
  CHECK(j["architecture"] == "mixtral");
  CHECK(j["n_tensors"] == 65);
  // tensors.json (from safetensors/torch) gives every tensor's shape: F32, 4 bytes per element.
  uint64_t total = 0;
  uint64_t experts = 0;
  for (const auto& [name, t] : ref.items()) {
    uint64_t n = 4;
    for (uint64_t d : t["shape"]) n *= d;
    total += n;
    if (name.find(".experts.") != std::string::npos) experts += n;
  }
  CHECK(j["bytes_total"] == total);
  CHECK(j["bytes_experts"] == experts);
  CHECK(j["bytes_per_expert"] == 2 * 3 * 32 * 64 * 4);
}

TEST_CASE("inspect exits 2 on malformed or inconsistent input", "[cli][inspect]") {
  Run usage = inspect({});
  CHECK(usage.rc == 2);
  CHECK_THAT(usage.err, Catch::Contains("usage: tandem inspect"));
  CHECK(inspect({"--bogus", "x"}).rc == 2);

  Run missing = inspect({"/nonexistent/file.gguf"});
  CHECK(missing.rc == 2);
  CHECK_THAT(missing.err, Catch::Contains("/nonexistent/file.gguf"));

  // A truncated copy of the tiny model is malformed.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("tandem_inspect_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ifstream in(kTinyMoe + "tiny-moe-f32.gguf", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(dir / "truncated.gguf", std::ios::binary);
    out.write(bytes.data(), 4096);
  }
  Run truncated = inspect({(dir / "truncated.gguf").string()});
  CHECK(truncated.rc == 2);
  CHECK(truncated.out.empty());
  CHECK_FALSE(truncated.err.empty());

  // A well-formed but inconsistent HF model: config.json promises 3 layers, the weights have 2.
  std::filesystem::create_directories(dir / "inconsistent");
  nlohmann::json config = read_json(kFixtures + "hf/olmoe/config.json");
  config["num_hidden_layers"] = 3;
  config["eos_token_id"] = 256;
  std::ofstream(dir / "inconsistent" / "config.json") << config.dump();
  std::filesystem::copy_file(kFixtures + "hf/olmoe/model.safetensors",
                             dir / "inconsistent" / "model.safetensors");
  Run bad = inspect({(dir / "inconsistent").string(), "--json"});
  CHECK(bad.rc == 2);
  CHECK(bad.out.empty());
  CHECK_THAT(bad.err, Catch::Contains("missing tensor model.layers.2.self_attn.q_proj.weight"));
  CHECK_THAT(bad.err, Catch::Contains("eos_token_id (256) >= vocab_size (256)"));
  std::filesystem::remove_all(dir);
}

}  // namespace tandem::cli
