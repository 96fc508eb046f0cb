// Split GGUF models (gguf_split.h): the shared tiny models re-written in shards by the `gguf`
// package's GGUFWriter (scripts/fixtures/make_split_gguf_fixtures.py) read exactly as the whole
// files, and broken sets of shards are refused with errors that name what is wrong.
#include <catch2/catch.hpp>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "engine/model/checkpoint.h"
#include "engine/model/gguf_split.h"
#include "engine/tokenizer/vocab.h"
#include "tests/model/gguf_builder.h"
#include "tests/model/safetensors_test_util.h"

namespace tandem::model {
namespace {

using tandem::testing::GgufBuilder;
using testing::TempDir;

const std::string kShared = std::string(TANDEM_SHARED_DIR) + "/data/";
const std::string kSplit = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/gguf/split/";

struct SplitFixture {
  std::string whole;
  std::string first_shard;
  size_t files_with_tensors;
};

const SplitFixture kFixtures[] = {
    // Nine tensors per shard, the first holding some.
    {kShared + "tiny-moe/tiny-moe-q8_0.gguf", kSplit + "tiny-moe-q8_0-00001-of-00003.gguf", 3},
    // A first shard of metadata alone, then two of tensors.
    {kShared + "tiny-gpt-oss/tiny-gpt-oss-q8_0.gguf",
     kSplit + "tiny-gpt-oss-q8_0-00001-of-00003.gguf", 2},
};

TEST_CASE("a split GGUF model reads as the whole file: every key, tensor and byte",
          "[model][gguf][split]") {
  for (const SplitFixture& f : kFixtures) {
    INFO(f.first_shard);
    Result<GgufFile> whole = GgufFile::open(f.whole);
    REQUIRE(whole.ok());
    Result<GgufFile> split = open_gguf_model(f.first_shard);
    REQUIRE(split.ok());
    CHECK(split->shards().size() == 2);
    CHECK(split->mappings().size() == 3);
    for (const GgufKeyValue& kv : whole->metadata()) {
      INFO(kv.key);
      const GgufValue* v = split->find(kv.key);
      REQUIRE(v != nullptr);
      CHECK(v->debug_string(1u << 20) == kv.value.debug_string(1u << 20));
    }
    REQUIRE(split->tensors().size() == whole->tensors().size());
    std::set<std::string> files;
    for (const TensorInfo& t : whole->tensors()) {
      INFO(t.name);
      const TensorInfo* s = split->find_tensor(t.name);
      REQUIRE(s != nullptr);
      CHECK(s->type == t.type);
      CHECK(s->shape == t.shape);
      REQUIRE(s->data.size() == t.data.size());
      CHECK(std::memcmp(s->data.data(), t.data.data(), t.data.size()) == 0);
      files.insert(s->file);
    }
    CHECK(files.size() == f.files_with_tensors);
    CHECK(files.count(f.first_shard) == (f.files_with_tensors == 3 ? 1 : 0));
  }
}

TEST_CASE("a split GGUF checkpoint binds as the whole file and lists every shard",
          "[model][gguf][split]") {
  for (const SplitFixture& f : kFixtures) {
    INFO(f.first_shard);
    Result<Checkpoint> whole = open_model(f.whole);
    REQUIRE(whole.ok());
    Result<Checkpoint> split = open_model(f.first_shard);
    REQUIRE(split.ok());
    CHECK(split->files.size() == 3);
    CHECK(split->spec->architecture == whole->spec->architecture);
    CHECK(split->spec->n_layers == whole->spec->n_layers);
    CHECK(split->spec->n_experts == whole->spec->n_experts);
    CHECK(split->spec->vocab_size == whole->spec->vocab_size);
    CHECK(checkpoint_sizes(*split).total == checkpoint_sizes(*whole).total);
    CHECK(check_checkpoint_files(*split).ok());
  }
}

TEST_CASE("a later shard is refused, naming the first shard to open", "[model][gguf][split]") {
  const std::string later = kSplit + "tiny-moe-q8_0-00002-of-00003.gguf";
  Result<Checkpoint> c = open_checkpoint(later);
  REQUIRE(c.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(c.status().message(),
             Catch::Contains("shard 2 of 3") &&
                 Catch::Contains(kSplit + "tiny-moe-q8_0-00001-of-00003.gguf"));
  // The tokenizer readers, which open one file, say the same rather than "no tokenizer".
  Result<GgufFile> file = GgufFile::open(later);
  REQUIRE(file.ok());
  Result<tokenizer::Vocab> vocab = tokenizer::Vocab::from_gguf(*file);
  REQUIRE(vocab.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(vocab.status().message(), Catch::Contains("open the first shard"));
}

// Shard i (from 0) of `count` holding the named F32 tensors, with the split keys given.
std::string shard_bytes(uint32_t no, uint32_t count, int32_t tensors,
                        const std::vector<std::string>& names) {
  GgufBuilder b;
  if (no == 0) b.kv_string("general.architecture", "qwen3moe");
  b.kv_u16("split.no", static_cast<uint16_t>(no));
  b.kv_u16("split.count", static_cast<uint16_t>(count));
  b.kv_i32("split.tensors.count", tensors);
  for (const std::string& n : names) b.tensor(n, 0, {4});
  const std::vector<uint8_t> bytes = b.build();
  return std::string(bytes.begin(), bytes.end());
}

TEST_CASE("broken sets of shards are refused with the reason", "[model][gguf][split]") {
  TempDir dir;
  const auto name = [](uint32_t i) { return gguf_shard_path("m", i, 3); };
  const auto write_all = [&](int32_t tensors) {
    dir.write(name(0), shard_bytes(0, 3, tensors, {"a"}));
    dir.write(name(1), shard_bytes(1, 3, tensors, {"b"}));
    return dir.write(name(2), shard_bytes(2, 3, tensors, {"c"}));
  };
  const std::string first = dir.path() + "/" + name(0);
  CHECK(name(1) == "m-00002-of-00003.gguf");

  SECTION("a good set opens, in shard order") {
    write_all(3);
    Result<GgufFile> f = open_gguf_model(first);
    REQUIRE(f.ok());
    REQUIRE(f->tensors().size() == 3);
    CHECK(f->tensors()[2].name == "c");
    CHECK(f->tensors()[2].file == dir.path() + "/" + name(2));
  }
  SECTION("a missing shard") {
    write_all(3);
    std::filesystem::remove(dir.path() + "/" + name(2));
    Result<GgufFile> f = open_gguf_model(first);
    REQUIRE(f.status().code() == StatusCode::kNotFound);
    CHECK_THAT(f.status().message(), Catch::Contains("shard 3 of 3") && Catch::Contains(name(2)));
  }
  SECTION("a first shard renamed, so the others cannot be found") {
    write_all(3);
    const std::string renamed = dir.write("model.gguf", shard_bytes(0, 3, 3, {"a"}));
    Result<GgufFile> f = open_gguf_model(renamed);
    REQUIRE(f.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(f.status().message(), Catch::Contains("-00001-of-00003.gguf"));
  }
  SECTION("a shard in the wrong place") {
    write_all(3);
    dir.write(name(1), shard_bytes(2, 3, 3, {"b"}));
    Result<GgufFile> f = open_gguf_model(first);
    REQUIRE(f.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(f.status().message(),
               Catch::Contains("does not belong") && Catch::Contains("split.no 2"));
  }
  SECTION("a shard of another split") {
    write_all(3);
    dir.write(name(2), shard_bytes(2, 4, 3, {"c"}));
    Result<GgufFile> f = open_gguf_model(first);
    REQUIRE(f.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(f.status().message(), Catch::Contains("split.count 4"));
  }
  SECTION("a shard without split keys") {
    write_all(3);
    GgufBuilder plain;
    plain.tensor("c", 0, {4});
    const std::vector<uint8_t> bytes = plain.build();
    dir.write(name(2), std::string(bytes.begin(), bytes.end()));
    Result<GgufFile> f = open_gguf_model(first);
    REQUIRE(f.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(f.status().message(), Catch::Contains("no split keys"));
  }
  SECTION("a tensor in two shards") {
    write_all(3);
    dir.write(name(2), shard_bytes(2, 3, 3, {"a"}));
    Result<GgufFile> f = open_gguf_model(first);
    REQUIRE(f.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(f.status().message(), Catch::Contains("tensor 'a'") && Catch::Contains(name(0)) &&
                                         Catch::Contains(name(2)));
  }
  SECTION("fewer tensors than split.tensors.count") {
    write_all(4);
    Result<GgufFile> f = open_gguf_model(first);
    REQUIRE(f.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(f.status().message(),
               Catch::Contains("split.tensors.count is 4") && Catch::Contains("hold 3 tensors"));
  }
  SECTION("split keys out of range") {
    const std::string zero = dir.write("zero.gguf", shard_bytes(0, 0, 1, {"a"}));
    Result<GgufFile> f = open_gguf_model(zero);
    REQUIRE(f.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(f.status().message(), Catch::Contains("'split.count' is 0"));
    const std::string past = dir.write("past.gguf", shard_bytes(3, 2, 1, {"a"}));
    f = open_gguf_model(past);
    REQUIRE(f.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(f.status().message(), Catch::Contains("not below split.count 2"));
  }
}

}  // namespace
}  // namespace tandem::model
