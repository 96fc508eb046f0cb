// The deepseek-v3 and kimi-k2 pre-tokenizers against HF `tokenizers`' own pre-tokenizers built as
// those models' tokenizer files describe them (scripts/fixtures/make_pretokenizer_fixtures.py):
// every fixture string must split into exactly HF's pieces.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/tokenizer/pre_tokenizer.h"
#include "tests/tokenizer/vocab_fixture.h"

namespace tandem::tokenizer {
namespace {

using testing::escape;
using testing::read_file;

std::string join_pieces(const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) out += "[" + escape(p) + "]";
  return out;
}

void check_splits(const std::string& name) {
  const std::string path =
      std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/tokenizer/pre_splits/" + name + ".jsonl";
  std::istringstream lines(read_file(path));
  auto pre = PreTokenizer::create(name);
  INFO(pre.status().to_string());
  REQUIRE(pre.ok());
  size_t n = 0;
  size_t mismatches = 0;
  std::ostringstream first;
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json c = nlohmann::json::parse(line);
    const std::string text = c["text"];
    const auto want = c["pieces"].get<std::vector<std::string>>();
    std::vector<std::string_view> views;
    REQUIRE(pre.value().split(text, views).ok());
    const std::vector<std::string> got(views.begin(), views.end());
    ++n;
    if (got != want && ++mismatches <= 8) {
      first << "\"" << escape(text) << "\"\n  hf:     " << join_pieces(want)
            << "\n  tandem: " << join_pieces(got) << "\n";
    }
  }
  INFO(first.str());
  CHECK(n >= 500);
  CHECK(mismatches == 0);
}

TEST_CASE("deepseek-v3 pre-tokenizer splits as DeepSeek-V3's tokenizer.json", "[tokenizer][hf]") {
  check_splits("deepseek-v3");
}

TEST_CASE("kimi-k2 pre-tokenizer splits as Kimi-K2's tiktoken pattern", "[tokenizer][hf]") {
  check_splits("kimi-k2");
}

}  // namespace
}  // namespace tandem::tokenizer
