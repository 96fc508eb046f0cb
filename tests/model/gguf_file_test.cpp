// Tests of GgufFile on valid files: builder-made v2/v3 images and the shared reference models,
// compared against summaries written by the `gguf` Python package (make_gguf_summaries.py).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/model/gguf_file.h"
#include "tests/model/gguf_builder.h"

namespace tandem::model {
namespace {

using tandem::testing::GgufBuilder;

GgufFile parse_ok(const std::vector<uint8_t>& bytes) {
  Result<GgufFile> r = GgufFile::parse(bytes, "mem.gguf");
  INFO(r.status().to_string());
  REQUIRE(r.ok());
  return std::move(r).value();
}

std::vector<uint8_t> sample_file(uint32_t version) {
  GgufBuilder b(version);
  b.kv_string("general.architecture", "qwen3moe")
      .kv_u32("qwen3moe.block_count", 2)
      .kv_u8("u8", 200)
      .kv_i8("i8", -5)
      .kv_u16("u16", 60000)
      .kv_i16("i16", -300)
      .kv_i32("i32", -70000)
      .kv_f32("qwen3moe.rope.freq_base", 1e6f)
      .kv_bool("flag", true)
      .kv_u64("u64", 1ull << 40)
      .kv_i64("i64", -(1ll << 40))
      .kv_f64("f64", 0.25)
      .kv_string_array("tokenizer.ggml.tokens", {"a", "bc", "", "\xe4\xbd\xa0"})
      .kv_i32_array("tokenizer.ggml.token_type", {1, -2, 3, 4})
      .kv_f32_array("tokenizer.ggml.scores", {0.5f, -1.5f})
      .tensor("token_embd.weight", 0, {8, 4})
      .tensor("blk.0.ffn_gate_exps.weight", 8, {64, 3, 2})
      .tensor("output_norm.weight", 1, {8});
  return b.build();
}

TEST_CASE("GgufFile parses every metadata type and the tensor table (v2 and v3)", "[gguf]") {
  for (uint32_t version : {2u, 3u}) {
    CAPTURE(version);
    const std::vector<uint8_t> bytes = sample_file(version);
    GgufFile f = parse_ok(bytes);
    CHECK(f.version() == version);
    CHECK(f.alignment() == 32);
    CHECK(f.metadata().size() == 15);
    CHECK(f.metadata()[0].key == "general.architecture");
    CHECK(f.metadata()[0].offset == 24);
    CHECK(*f.get_string("general.architecture") == "qwen3moe");
    CHECK(*f.get_u32("qwen3moe.block_count") == 2);
    CHECK(*f.get_u32("u8") == 200);
    CHECK(*f.get_i32("i8") == -5);
    CHECK(*f.get_u32("u16") == 60000);
    CHECK(*f.get_i64("i16") == -300);
    CHECK(*f.get_i32("i32") == -70000);
    CHECK(*f.get_f32("qwen3moe.rope.freq_base") == 1e6f);
    CHECK(*f.get_bool("flag"));
    CHECK(*f.get_u64("u64") == (1ull << 40));
    CHECK(*f.get_i64("i64") == -(1ll << 40));
    CHECK(*f.get_f64("f64") == 0.25);
    CHECK(*f.get_f32("f64") == 0.25f);
    const auto tokens = *f.get_string_array("tokenizer.ggml.tokens");
    REQUIRE(tokens.size() == 4);
    CHECK(tokens[1] == "bc");
    CHECK(tokens[2].empty());
    CHECK(tokens[3] == "\xe4\xbd\xa0");
    CHECK(*f.get_i64_array("tokenizer.ggml.token_type") == std::vector<int64_t>{1, -2, 3, 4});
    CHECK(*f.get_f32_array("tokenizer.ggml.scores") == std::vector<float>{0.5f, -1.5f});
    CHECK(f.find("tokenizer.ggml.scores")->element(1).to_f32().value() == -1.5f);

    REQUIRE(f.tensors().size() == 3);
    const TensorInfo* e = f.find_tensor("blk.0.ffn_gate_exps.weight");
    REQUIRE(e != nullptr);
    CHECK(e->type == TensorType::kQ8_0);
    CHECK(e->shape == std::vector<uint64_t>{2, 3, 64});  // outermost first
    CHECK(e->n_elements == 384);
    CHECK(e->data.size() == 12 * 34);
    CHECK(e->file == "mem.gguf");
    CHECK(e->file_offset % 32 == 0);
    CHECK(e->data.data() == bytes.data() + e->file_offset);
    CHECK(e->data[0] == static_cast<uint8_t>(1 * 37));  // the builder's pattern for tensor #1
    CHECK(f.find_tensor("missing") == nullptr);
    CHECK(f.data_offset() % 32 == 0);
    CHECK(f.tensors()[0].file_offset == f.data_offset());
  }
}

TEST_CASE("GgufFile getters convert in range and name the key on errors", "[gguf]") {
  const std::vector<uint8_t> bytes = sample_file(3);
  GgufFile f = parse_ok(bytes);
  Result<uint32_t> missing = f.get_u32("qwen3moe.expert_count");
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(),
             Catch::Contains("mem.gguf") && Catch::Contains("qwen3moe.expert_count"));
  Result<uint32_t> wrong = f.get_u32("general.architecture");
  CHECK(wrong.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(wrong.status().message(),
             Catch::Contains("mem.gguf: offset 24: key 'general.architecture'") &&
                 Catch::Contains("STRING"));
  CHECK(f.get_u32("i8").status().code() == StatusCode::kOutOfRange);   // negative
  CHECK(f.get_u32("u64").status().code() == StatusCode::kOutOfRange);  // 2^40
  CHECK(f.get_i32("i64").status().code() == StatusCode::kOutOfRange);
  CHECK(f.get_f32("u8").status().code() == StatusCode::kInvalidArgument);
  CHECK(f.get_string_array("tokenizer.ggml.token_type").status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(f.get_i64_array("tokenizer.ggml.tokens").status().code() == StatusCode::kInvalidArgument);
  CHECK(*f.get_u32_or("qwen3moe.expert_count", 7) == 7);
  CHECK(*f.get_u32_or("qwen3moe.block_count", 7) == 2);
  CHECK(!f.get_u32_or("general.architecture", 7).ok());
  CHECK(*f.get_f32_or("nope", 1.5f) == 1.5f);
  CHECK(*f.get_string_or("nope", "x") == "x");
  CHECK(*f.get_bool_or("flag", false));
  CHECK(f.find("qwen3moe.block_count")->debug_string() == "UINT32 2");
  CHECK(f.find("tokenizer.ggml.tokens")->debug_string(2) ==
        "ARRAY[STRING x 4] [\"a\", \"bc\", ...]");
}

TEST_CASE("GgufFile honours general.alignment and an empty tensor table", "[gguf]") {
  GgufBuilder b;
  b.kv_u32("general.alignment", 64).data_alignment(64).tensor("a", 0, {3}).tensor("b", 0, {5});
  const std::vector<uint8_t> bytes = b.build();
  GgufFile f = parse_ok(bytes);
  CHECK(f.alignment() == 64);
  CHECK(f.data_offset() == b.offset_of("data_section"));
  CHECK(f.find_tensor("b")->file_offset == b.offset_of("data:b"));
  CHECK(f.find_tensor("b")->file_offset % 64 == 0);

  GgufBuilder empty;
  empty.kv_string("general.architecture", "x");
  const std::vector<uint8_t> e = empty.build();
  GgufFile g = parse_ok(e);
  CHECK(g.tensors().empty());
  CHECK(g.data_offset() >= e.size());
}

TEST_CASE("GgufFile::open maps a file and reports a missing one", "[gguf]") {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / "tandem_gguf_open_test.gguf";
  const std::vector<uint8_t> bytes = sample_file(3);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  {
    Result<GgufFile> r = GgufFile::open(path.string());
    REQUIRE(r.ok());
    GgufFile moved = std::move(r).value();  // views survive the move
    CHECK(*moved.get_string("general.architecture") == "qwen3moe");
    CHECK(moved.find_tensor("output_norm.weight")->file == path.string());
  }
  std::filesystem::remove(path);
  CHECK(GgufFile::open(path.string()).status().code() == StatusCode::kNotFound);
}

// ---- the shared reference files against gguf-py's view of them ----------------------------------

std::string json_text(const nlohmann::json& j) {
  if (j.is_string()) return j.get<std::string>();
  const std::string hex = j.at("hex").get<std::string>();
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

void check_scalar(const GgufValue& v, const nlohmann::json& expected) {
  if (v.is_float()) {
    CHECK(*v.to_f64() == Approx(expected.get<double>()).epsilon(1e-7));
  } else if (v.type() == GgufType::kBool) {
    CHECK(*v.to_bool() == expected.get<bool>());
  } else if (v.is_string()) {
    CHECK(std::string(*v.to_string()) == json_text(expected));
  } else if (expected.is_number_unsigned()) {
    CHECK(*v.to_u64() == expected.get<uint64_t>());
  } else {
    CHECK(*v.to_i64() == expected.get<int64_t>());
  }
}

void compare_with_summary(const std::filesystem::path& summary_path) {
  std::ifstream in(summary_path);
  const nlohmann::json s = nlohmann::json::parse(in);
  const std::string path =
      std::string(TANDEM_SHARED_DIR) + "/data/" + s.at("file").get<std::string>();
  INFO(path);
  Result<GgufFile> r = GgufFile::open(path);
  INFO(r.status().to_string());
  REQUIRE(r.ok());
  const GgufFile& f = *r;
  CHECK(f.bytes().size() == s.at("file_size").get<uint64_t>());
  CHECK(f.version() == s.at("version").get<uint32_t>());
  CHECK(f.metadata().size() == s.at("n_kv").get<size_t>());
  CHECK(f.tensors().size() == s.at("n_tensors").get<size_t>());
  CHECK(f.alignment() == s.at("alignment").get<uint64_t>());
  CHECK(f.data_offset() == s.at("data_offset").get<uint64_t>());
  CHECK(*f.get_string("general.architecture") == s.at("architecture").get<std::string>());
  if (!s.at("vocab_size").is_null()) {
    CHECK(f.get_string_array("tokenizer.ggml.tokens")->size() == s.at("vocab_size").get<size_t>());
  }
  for (const auto& [key, e] : s.at("metadata").items()) {
    INFO(key);
    const GgufValue* v = f.find(key);
    REQUIRE(v != nullptr);
    CHECK(gguf_type_name(v->type()) == e.at("type").get<std::string>());
    if (v->is_array()) {
      CHECK(gguf_type_name(v->array_type()) == e.at("element_type").get<std::string>());
      CHECK(v->array_size() == e.at("size").get<uint64_t>());
      if (e.contains("first")) {
        check_scalar(v->element(0), e.at("first"));
        check_scalar(v->element(v->array_size() - 1), e.at("last"));
      }
    } else if (v->is_string() && e.contains("length")) {
      CHECK(v->to_string()->size() == e.at("length").get<size_t>());
      CHECK(std::string(v->to_string()->substr(0, 64)) == json_text(e.at("prefix")));
    } else {
      check_scalar(*v, e.at("value"));
    }
  }
  size_t i = 0;
  for (const nlohmann::json& t : s.at("tensors")) {
    REQUIRE(i < f.tensors().size());
    const TensorInfo& info = f.tensors()[i++];
    INFO(info.name);
    CHECK(info.name == t.at("name").get<std::string>());
    CHECK(static_cast<uint32_t>(info.type) == t.at("type").get<uint32_t>());
    CHECK(info.shape == t.at("shape").get<std::vector<uint64_t>>());
    CHECK(info.file_offset == t.at("offset").get<uint64_t>());
    CHECK(info.data.size() == t.at("n_bytes").get<uint64_t>());
    CHECK(f.find_tensor(info.name) == &info);
  }
}

TEST_CASE("GgufFile reads the shared tiny-moe and vocab files as gguf-py does", "[gguf]") {
  const std::filesystem::path dir =
      std::filesystem::path(TANDEM_SOURCE_DIR) / "tests/fixtures/gguf/summaries";
  size_t compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    compare_with_summary(entry.path());
    ++compared;
  }
  CHECK(compared == 10);  // 2 tiny-moe models + 8 vocab files
}

TEST_CASE("GgufFile exposes tiny-moe hyper-parameters as ModelSpec will read them", "[gguf]") {
  Result<GgufFile> r =
      GgufFile::open(std::string(TANDEM_SHARED_DIR) + "/data/tiny-moe/tiny-moe-q8_0.gguf");
  REQUIRE(r.ok());
  // Values from the tiny-moe README (written by its producer, not by this project).
  CHECK(*r->get_u32("qwen3moe.block_count") == 2);
  CHECK(*r->get_u32("qwen3moe.expert_count") == 8);
  CHECK(*r->get_u32("qwen3moe.expert_used_count") == 2);
  CHECK(*r->get_u32("qwen3moe.attention.head_count_kv") == 2);
  CHECK(*r->get_f32("qwen3moe.rope.freq_base") == 1000000.0f);
  CHECK(*r->get_u32("general.file_type") == 7);
  CHECK(*r->get_u32("tokenizer.ggml.bos_token_id") == 2048);
  CHECK(r->get_string_array("tokenizer.ggml.merges")->size() == 1792);
  CHECK(r->get_i64_array("tokenizer.ggml.token_type")->size() == 2051);
}

}  // namespace
}  // namespace tandem::model

namespace tandem::model {
namespace {

GgufFile open_corpus(const std::string& name) {
  Result<GgufFile> r = GgufFile::open(std::string(TANDEM_SOURCE_DIR) + "/fuzz/corpus/gguf/" + name);
  INFO(name << ": " << r.status().to_string());
  REQUIRE(r.ok());
  return std::move(r).value();
}

TEST_CASE("GgufFile reads files written by gguf-py's GGUFWriter (the fuzz seeds)", "[gguf]") {
  for (const char* name : {"all_types.gguf", "all_types_v2.gguf"}) {
    GgufFile f = open_corpus(name);
    CHECK(f.version() == (std::string(name).find("v2") != std::string::npos ? 2u : 3u));
    CHECK(*f.get_u32("t.u8") == 200);
    CHECK(*f.get_i32("t.i8") == -5);
    CHECK(*f.get_u32("t.u16") == 60000);
    CHECK(*f.get_i32("t.i16") == -300);
    CHECK(*f.get_u32("t.u32") == 4000000000u);
    CHECK(*f.get_i32("t.i32") == -70000);
    CHECK(*f.get_f32("t.f32") == 1.5f);
    CHECK(*f.get_bool("t.bool"));
    CHECK(*f.get_string("t.str") == "h\xc3\xa9llo");
    CHECK(*f.get_u64("t.u64") == (1ull << 40));
    CHECK(*f.get_i64("t.i64") == -(1ll << 40));
    CHECK(*f.get_f64("t.f64") == 0.25);
    CHECK(f.get_string_array("t.arr_str")->size() == 4);
    CHECK(*f.get_i64_array("t.arr_int") == std::vector<int64_t>{1, -2, 3});
    CHECK(*f.get_f32_array("t.arr_f32") == std::vector<float>{0.5f, -1.5f});
    CHECK(*f.find("t.arr_bool")->to_bool_array() == std::vector<bool>{true, false});
    const GgufValue* nested = f.find("t.nested");
    REQUIRE(nested != nullptr);
    CHECK(nested->array_type() == GgufType::kArray);
    CHECK(*nested->element(0).to_i64_array() == std::vector<int64_t>{1, 2});
    CHECK(*nested->element(1).to_i64_array() == std::vector<int64_t>{3});
    const TensorInfo* x = f.find_tensor("x");
    REQUIRE(x != nullptr);
    CHECK(x->shape == std::vector<uint64_t>{8});
    float third = 0;
    std::memcpy(&third, x->data.data() + 8, 4);
    CHECK(third == 2.0f);
  }
  GgufFile q = open_corpus("quantized.gguf");
  CHECK(q.find_tensor("q8_0")->type == TensorType::kQ8_0);
  CHECK(q.find_tensor("q8_0")->shape == std::vector<uint64_t>{2, 64});
  CHECK(q.find_tensor("f16")->shape == std::vector<uint64_t>{4, 8});
  CHECK(q.find_tensor("i32")->shape == std::vector<uint64_t>{1, 1, 2, 2});
  GgufFile a = open_corpus("aligned64.gguf");
  CHECK(a.alignment() == 64);
  CHECK(a.find_tensor("b")->file_offset % 64 == 0);
  CHECK(open_corpus("tokenizer.gguf").get_string_array("tokenizer.ggml.tokens")->size() == 64);
  CHECK(open_corpus("minimal.gguf").tensors().empty());
}

}  // namespace
}  // namespace tandem::model
