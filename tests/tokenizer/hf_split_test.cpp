// Tests for tokenizer.json Split behaviors (against HF `tokenizers` pieces) and for the loader's
// refusals of unsupported or malformed tokenizer.json files.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/tokenizer/vocab_fixture.h"

namespace tandem::tokenizer {
namespace {

SplitBehavior behavior_of(const std::string& name) {
  if (name == "removed") return SplitBehavior::kRemoved;
  if (name == "merged_with_previous") return SplitBehavior::kMergedWithPrevious;
  if (name == "merged_with_next") return SplitBehavior::kMergedWithNext;
  if (name == "contiguous") return SplitBehavior::kContiguous;
  REQUIRE(name == "isolated");
  return SplitBehavior::kIsolated;
}

TEST_CASE("Split behaviors give HF tokenizers' pieces", "[tokenizer][hf]") {
  std::istringstream lines(testing::read_file(std::string(TANDEM_SOURCE_DIR) +
                                              "/tests/fixtures/tokenizer/split_behaviors.jsonl"));
  std::string line;
  size_t cases = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    SplitRule rule{j.at("pattern").get<std::string>(), j.at("literal").get<bool>(),
                   behavior_of(j.at("behavior").get<std::string>()), j.at("invert").get<bool>()};
    auto pre = PreTokenizer::from_rules("test", {rule});
    REQUIRE(pre.ok());
    const std::string text = j.at("text").get<std::string>();
    std::vector<std::string_view> pieces;
    REQUIRE(pre.value().split(text, pieces).ok());
    const std::vector<std::string> got(pieces.begin(), pieces.end());
    INFO(line);
    CHECK(got == j.at("pieces").get<std::vector<std::string>>());
    ++cases;
  }
  CHECK(cases == 210);
}

// A minimal byte-level tokenizer.json with the given normalizer / model type.
std::string tiny_json(const std::string& normalizer, const std::string& model_type = "BPE") {
  return R"({"version":"1.0","normalizer":)" + normalizer +
         R"(,"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},)"
         R"("decoder":{"type":"ByteLevel"},"model":{"type":")" +
         model_type + R"(","vocab":{"a":0,"b":1,"ab":2,"Ġ":3},"merges":["a b"]}})";
}

TEST_CASE("a minimal tokenizer.json loads and merges", "[tokenizer][hf]") {
  auto tok = Tokenizer::from_hf_json(tiny_json("null"), "", "tiny");
  INFO(tok.status().to_string());
  REQUIRE(tok.ok());
  auto ids = tok.value().encode("ab ab", EncodeOptions{});
  REQUIRE(ids.ok());
  CHECK(ids.value() == std::vector<int32_t>{2, 3, 2});
}

TEST_CASE("unsupported tokenizer.json parts are refused by name", "[tokenizer][hf]") {
  auto lower = Tokenizer::from_hf_json(tiny_json(R"({"type":"Lowercase"})"), "", "lower");
  REQUIRE(!lower.ok());
  CHECK(lower.status().code() == StatusCode::kUnimplemented);
  CHECK(lower.status().to_string().find("Lowercase") != std::string::npos);

  auto wordpiece = Tokenizer::from_hf_json(tiny_json("null", "WordPiece"), "", "wp");
  REQUIRE(!wordpiece.ok());
  CHECK(wordpiece.status().code() == StatusCode::kUnimplemented);
  CHECK(wordpiece.status().to_string().find("WordPiece") != std::string::npos);
}

TEST_CASE("malformed tokenizer.json is INVALID_ARGUMENT", "[tokenizer][hf]") {
  for (const char* text :
       {"", "{", "[]", R"({"model":{"type":"BPE","vocab":{"a":-1},"merges":[]}})",
        R"({"model":{"type":"BPE","vocab":{"a":"x"},"merges":[]}})"}) {
    auto tok = Tokenizer::from_hf_json(text, "", "bad");
    INFO(text);
    REQUIRE(!tok.ok());
    CHECK(tok.status().code() == StatusCode::kInvalidArgument);
  }
  auto missing = Tokenizer::load_hf("/nonexistent-dir");
  REQUIRE(!missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::tokenizer
