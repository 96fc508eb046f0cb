// Tests of SafetensorsCheckpoint: HF directories (single, sharded), lone files, index checks,
// path containment (A11), and the transformers-written fixtures in tests/fixtures/hf/.
#include "engine/model/safetensors_checkpoint.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>

#include "engine/model/hf_config.h"
#include "tests/model/safetensors_test_util.h"

namespace tandem::model {
namespace {

using testing::entry;
using testing::f32_bytes;
using testing::safetensors_bytes;
using testing::TempDir;

const std::string kConfig = "{\"model_type\": \"toy\", \"hidden_size\": 2}";

// A shard holding F32 tensors of shape [2] named `names`, values 10*i, 10*i+1.
std::string shard_with(const std::vector<std::string>& names) {
  std::string header = "{";
  std::string data;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) header += ", ";
    header += entry(names[i], "F32", "[2]", 8 * i, 8 * i + 8);
    data += f32_bytes({10.0f * i, 10.0f * i + 1});
  }
  return safetensors_bytes(header + "}", data);
}

std::string index_json(const std::vector<std::pair<std::string, std::string>>& map) {
  std::string s = "{\"metadata\": {\"total_size\": 32}, \"weight_map\": {";
  for (size_t i = 0; i < map.size(); ++i) {
    if (i > 0) s += ", ";
    s += "\"" + map[i].first + "\": \"" + map[i].second + "\"";
  }
  return s + "}}";
}

// A valid two-shard directory: a,b in shard 1; c,d in shard 2.
void write_sharded(const TempDir& dir) {
  dir.write("config.json", kConfig);
  dir.write("model-00001-of-00002.safetensors", shard_with({"a", "b"}));
  dir.write("model-00002-of-00002.safetensors", shard_with({"c", "d"}));
  dir.write("model.safetensors.index.json",
            index_json({{"a", "model-00001-of-00002.safetensors"},
                        {"b", "model-00001-of-00002.safetensors"},
                        {"c", "model-00002-of-00002.safetensors"},
                        {"d", "model-00002-of-00002.safetensors"}}));
}

Status open_status(const std::string& path, const SafetensorsCheckpointOptions& options = {}) {
  return SafetensorsCheckpoint::open(path, options).status();
}

TEST_CASE("a single-file directory exposes config, generation config and tensors", "[model]") {
  TempDir dir;
  dir.write("config.json", kConfig);
  dir.write("generation_config.json", "{\"eos_token_id\": [2, 3]}");
  dir.write("model.safetensors", shard_with({"x", "y"}));
  Result<SafetensorsCheckpoint> c = SafetensorsCheckpoint::open(dir.path());
  REQUIRE(c.ok());
  REQUIRE(c->config().has_value());
  CHECK((*c->config())["model_type"] == "toy");
  REQUIRE(c->generation_config().has_value());
  CHECK((*c->generation_config())["eos_token_id"][1] == 3);
  REQUIRE(c->shards().size() == 1);
  REQUIRE(c->tensors().size() == 2);
  const TensorInfo* y = c->find("y");
  REQUIRE(y != nullptr);
  float v[2];
  std::memcpy(v, y->data.data(), sizeof v);
  CHECK(v[0] == 10.0f);
  CHECK(v[1] == 11.0f);
  CHECK(c->find("z") == nullptr);
}

TEST_CASE("a sharded directory maps each shard once and checks the index", "[model]") {
  TempDir dir;
  write_sharded(dir);
  Result<SafetensorsCheckpoint> c = SafetensorsCheckpoint::open(dir.path());
  REQUIRE(c.ok());
  CHECK_FALSE(c->generation_config().has_value());
  CHECK(c->index_metadata()["total_size"] == 32);
  REQUIRE(c->shards().size() == 2);
  REQUIRE(c->tensors().size() == 4);
  CHECK(c->find("c")->file == dir.path() + "/model-00002-of-00002.safetensors");
  CHECK(c->find("a")->file == dir.path() + "/model-00001-of-00002.safetensors");
  float v[2];
  std::memcpy(v, c->find("d")->data.data(), sizeof v);
  CHECK(v[0] == 10.0f);
}

TEST_CASE("index and shard disagreements are errors naming the tensor", "[model]") {
  TempDir dir;
  write_sharded(dir);
  const std::string one = "model-00001-of-00002.safetensors";
  const std::string two = "model-00002-of-00002.safetensors";
  SECTION("tensor listed under the wrong shard") {
    dir.write("model.safetensors.index.json",
              index_json({{"a", one}, {"b", two}, {"c", two}, {"d", two}}));
    const Status st = open_status(dir.path());
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(st.message(), Catch::Contains("\"b\"") && Catch::Contains(two));
  }
  SECTION("tensor in a shard but not in the index") {
    dir.write("model.safetensors.index.json", index_json({{"a", one}, {"c", two}, {"d", two}}));
    const Status st = open_status(dir.path());
    CHECK_THAT(st.message(), Catch::Contains("\"b\"") && Catch::Contains("not listed"));
  }
  SECTION("tensor in the index but in no shard") {
    dir.write("model.safetensors.index.json",
              index_json({{"a", one}, {"b", one}, {"c", two}, {"d", two}, {"e", two}}));
    const Status st = open_status(dir.path());
    CHECK_THAT(st.message(), Catch::Contains("\"e\"") && Catch::Contains("does not hold it"));
  }
  SECTION("missing shard file") {
    dir.write("model.safetensors.index.json",
              index_json({{"a", one}, {"b", one}, {"c", "model-00003-of-00003.safetensors"}}));
    const Status st = open_status(dir.path());
    CHECK(st.code() == StatusCode::kNotFound);
    CHECK_THAT(st.message(), Catch::Contains("model-00003-of-00003.safetensors"));
  }
  SECTION("the same tensor in two shards") {
    dir.write(two, shard_with({"c", "d", "a"}));
    const Status st = open_status(dir.path());
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(st.message(), Catch::Contains(dir.path() + "/" + two) && Catch::Contains("\"a\"") &&
                                 Catch::Contains("under shard " + one));
  }
  SECTION("a model.safetensors beside the index: the same tensors twice") {
    dir.write("model.safetensors", shard_with({"a", "b", "c", "d"}));
    const Status st = open_status(dir.path());
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(st.message(), Catch::Contains("holds both model.safetensors.index.json") &&
                                 Catch::Contains("model.safetensors: two copies"));
  }
  SECTION("duplicate tensor name in the index json") {
    dir.write("model.safetensors.index.json",
              index_json({{"a", one}, {"a", one}, {"b", one}, {"c", two}, {"d", two}}));
    const Status st = open_status(dir.path());
    CHECK_THAT(st.message(), Catch::Contains("duplicate key \"a\"") &&
                                 Catch::Contains("model.safetensors.index.json"));
  }
  SECTION("weight_map of the wrong type") {
    dir.write("model.safetensors.index.json", "{\"weight_map\": [\"a\"]}");
    CHECK_THAT(open_status(dir.path()).message(), Catch::Contains("weight_map"));
    dir.write("model.safetensors.index.json", "{\"weight_map\": {\"a\": 1}}");
    CHECK_THAT(open_status(dir.path()).message(), Catch::Contains("weight_map[\"a\"]"));
  }
  SECTION("a broken shard reports the shard's path") {
    dir.write(two, "garbage");
    const Status st = open_status(dir.path());
    CHECK_THAT(st.message(), Catch::Contains(dir.path() + "/" + two));
  }
}

TEST_CASE("A11: shard paths escaping the model directory are refused", "[model]") {
  TempDir outer;
  outer.write("elsewhere/secret.safetensors", shard_with({"a"}));
  outer.write("model/config.json", kConfig);
  const std::string model = outer.path() + "/model";
  SECTION("..") {
    outer.write("model/model.safetensors.index.json",
                index_json({{"a", "../elsewhere/secret.safetensors"}}));
    const Status st = open_status(model);
    CHECK(st.code() == StatusCode::kPermissionDenied);
    CHECK_THAT(st.message(), Catch::Contains("\"..\""));
  }
  SECTION("absolute path") {
    outer.write("model/model.safetensors.index.json",
                index_json({{"a", outer.path() + "/elsewhere/secret.safetensors"}}));
    const Status st = open_status(model);
    CHECK(st.code() == StatusCode::kPermissionDenied);
    CHECK_THAT(st.message(), Catch::Contains("relative"));
  }
  SECTION("symlink resolving outside, allowed under a wider containment root") {
    outer.write("model/model.safetensors.index.json", index_json({{"a", "link.safetensors"}}));
    std::filesystem::create_symlink(outer.path() + "/elsewhere/secret.safetensors",
                                    model + "/link.safetensors");
    const Status st = open_status(model);
    CHECK(st.code() == StatusCode::kPermissionDenied);
    const std::string resolved =
        std::filesystem::canonical(outer.path() + "/elsewhere/secret.safetensors").string();
    CHECK_THAT(st.message(), Catch::Contains("resolves to " + resolved));
    SafetensorsCheckpointOptions wide;
    wide.containment_root = outer.path();
    CHECK(open_status(model, wide).ok());
  }
  SECTION("config.json symlinked outside") {
    outer.write("elsewhere/config.json", kConfig);
    std::filesystem::remove(model + "/config.json");
    std::filesystem::create_symlink(outer.path() + "/elsewhere/config.json",
                                    model + "/config.json");
    outer.write("model/model.safetensors", shard_with({"a"}));
    CHECK(open_status(model).code() == StatusCode::kPermissionDenied);
  }
  SECTION("a symlink that stays inside is fine") {
    outer.write("model/real/w.safetensors", shard_with({"a"}));
    std::filesystem::create_symlink(model + "/real/w.safetensors", model + "/model.safetensors");
    CHECK(open_status(model).ok());
  }
}

TEST_CASE("directories without config or weights, and lone files", "[model]") {
  TempDir dir;
  dir.write("model.safetensors", shard_with({"a"}));
  const Status no_config = open_status(dir.path());
  CHECK(no_config.code() == StatusCode::kNotFound);
  CHECK_THAT(no_config.message(), Catch::Contains("config.json"));

  Result<SafetensorsCheckpoint> lone =
      SafetensorsCheckpoint::open(dir.path() + "/model.safetensors");
  REQUIRE(lone.ok());
  CHECK_FALSE(lone->config().has_value());
  CHECK(lone->tensors().size() == 1);

  TempDir empty;
  empty.write("config.json", kConfig);
  CHECK_THAT(open_status(empty.path()).message(), Catch::Contains("model.safetensors"));
  CHECK(open_status(empty.path() + "/nonexistent").code() == StatusCode::kNotFound);
}

TEST_CASE("config.json must be a bounded, duplicate-free JSON object (A7, A9)", "[model]") {
  TempDir dir;
  dir.write("model.safetensors", shard_with({"a"}));
  dir.write("config.json", "{\"a\": 1, \"a\": 2}");
  CHECK_THAT(open_status(dir.path()).message(), Catch::Contains("duplicate key \"a\""));
  dir.write("config.json", std::string(100000, '[') + std::string(100000, ']'));
  CHECK_THAT(open_status(dir.path()).message(), Catch::Contains("nests deeper"));
  dir.write("config.json", "[1]");
  CHECK_THAT(open_status(dir.path()).message(), Catch::Contains("not a JSON object"));
  dir.write("config.json", "");
  CHECK(open_status(dir.path()).code() == StatusCode::kInvalidArgument);
  dir.write("config.json", kConfig);
  dir.write("generation_config.json", "{\"x\": ");
  CHECK_THAT(open_status(dir.path()).message(), Catch::Contains("generation_config.json"));
}

// --- Fixtures written by transformers' save_pretrained (scripts/fixtures/make_hf_fixtures.py).

float element_as_float(const TensorInfo& t, size_t i) {
  if (t.type == TensorType::kF32) {
    float f;
    std::memcpy(&f, t.data.data() + 4 * i, 4);
    return f;
  }
  REQUIRE(t.type == TensorType::kBF16);
  uint16_t h;
  std::memcpy(&h, t.data.data() + 2 * i, 2);
  const uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void check_fixture(const std::string& name, const std::string& torch_dtype, size_t n_shards) {
  const std::string dir = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/hf/" + name;
  INFO(dir);
  Result<SafetensorsCheckpoint> c = SafetensorsCheckpoint::open(dir);
  REQUIRE(c.ok());
  Result<nlohmann::json> summary = load_json_file(dir + "/tensors.json");
  REQUIRE(summary.ok());
  CHECK(c->shards().size() == n_shards);
  CHECK(c->tensors().size() == summary->size());
  CHECK(c->config()->at("vocab_size") == 256);
  CHECK(c->generation_config().has_value());
  for (const auto& [tensor, want] : summary->items()) {
    INFO(tensor);
    const TensorInfo* t = c->find(tensor);
    REQUIRE(t != nullptr);
    CHECK(std::filesystem::path(t->file).filename().string() == want["file"].get<std::string>());
    CHECK(want["dtype"] == torch_dtype);
    CHECK(t->type == (torch_dtype == "float32" ? TensorType::kF32 : TensorType::kBF16));
    CHECK(t->shape == want["shape"].get<std::vector<uint64_t>>());
    const auto first4 = want["first4"].get<std::vector<float>>();
    REQUIRE(t->n_elements >= first4.size());
    for (size_t i = 0; i < first4.size(); ++i) CHECK(element_as_float(*t, i) == first4[i]);
  }
}

TEST_CASE("transformers fixtures: names, dtypes, shapes and values match torch", "[model]") {
  check_fixture("qwen3_moe", "float32", 1);
  check_fixture("qwen3_moe_bf16", "bfloat16", 1);
  check_fixture("qwen2_moe", "float32", 1);
  check_fixture("olmoe", "float32", 1);
  check_fixture("mixtral_sharded", "float32", 4);
}

TEST_CASE("sharded fixture: tensors spread over the shards named by the index", "[model]") {
  const std::string dir = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/hf/mixtral_sharded";
  Result<SafetensorsCheckpoint> c = SafetensorsCheckpoint::open(dir);
  REQUIRE(c.ok());
  Result<nlohmann::json> index = load_json_file(dir + "/model.safetensors.index.json");
  REQUIRE(index.ok());
  std::set<std::string> files;
  uint64_t total = 0;
  for (const TensorInfo& t : c->tensors()) {
    CHECK(std::filesystem::path(t.file).filename().string() ==
          (*index)["weight_map"][t.name].get<std::string>());
    files.insert(t.file);
    total += t.data.size();
  }
  CHECK(files.size() == 4);
  CHECK(total == (*index)["metadata"]["total_size"].get<uint64_t>());
  const TensorInfo* w1 = c->find("model.layers.1.block_sparse_moe.experts.7.w1.weight");
  REQUIRE(w1 != nullptr);
  CHECK(w1->shape == std::vector<uint64_t>{32, 64});
}

}  // namespace
}  // namespace tandem::model
