// Tests for tokenizer.json loading and export: Tandem's encodings (GGUF tokenizer and the tokenizer
// loaded back from the exported tokenizer.json) against HF `tokenizers` (fixtures from
// scripts/fixtures/make_tokenizer_fixtures.py).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/model/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_export.h"
#include "tests/tokenizer/vocab_fixture.h"

namespace tandem::tokenizer {
namespace {

using testing::escape;
using testing::join;
using testing::read_file;

const std::string kFixtures = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/tokenizer";

std::string gguf_path(const std::string& name) {
  if (name == "tiny-moe")
    return std::string(TANDEM_SHARED_DIR) + "/data/tiny-moe/tiny-moe-f32.gguf";
  return testing::vocab_path(name);
}

std::vector<std::string> fixture_strings() {
  std::vector<std::string> out;
  std::istringstream lines(read_file(kFixtures + "/strings.jsonl"));
  std::string line;
  while (std::getline(lines, line)) out.push_back(nlohmann::json::parse(line).at("text"));
  return out;
}

struct Expected {
  std::vector<int32_t> ids;    // HF: specials parsed, no BOS/EOS
  std::vector<int32_t> split;  // HF encode_special_tokens: specials as text
  std::vector<int32_t> add;    // HF add_special_tokens=True
};

std::vector<Expected> fixture_ids(const std::string& name) {
  std::vector<Expected> out;
  std::istringstream lines(read_file(kFixtures + "/" + name + ".ids.jsonl"));
  std::string line;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    Expected e;
    e.ids = j.at("ids").get<std::vector<int32_t>>();
    e.split = j.contains("split") ? j.at("split").get<std::vector<int32_t>>() : e.ids;
    e.add = j.contains("add") ? j.at("add").get<std::vector<int32_t>>() : e.ids;
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<int32_t> encode(const Tokenizer& tok, const std::string& text, bool parse_special,
                            bool add_special) {
  auto ids = tok.encode(text, EncodeOptions{add_special, parse_special});
  REQUIRE(ids.ok());
  return std::move(ids).value();
}

Tokenizer export_and_reload(const std::string& name) {
  auto file = model::GgufFile::open(gguf_path(name));
  REQUIRE(file.ok());
  auto files = export_hf_tokenizer(file.value());
  INFO(files.status().to_string());
  REQUIRE(files.ok());
  auto tok = Tokenizer::from_hf_json(files.value().tokenizer_json,
                                     files.value().tokenizer_config_json, name);
  INFO(tok.status().to_string());
  REQUIRE(tok.ok());
  return std::move(tok).value();
}

// Compares every fixture string's three encodings; returns the number of mismatching strings.
size_t count_mismatches(const Tokenizer& tok, const std::string& label,
                        const std::vector<std::string>& strings,
                        const std::vector<Expected>& expected, std::string* report) {
  REQUIRE(strings.size() == expected.size());
  size_t mismatches = 0;
  std::ostringstream first;
  for (size_t i = 0; i < strings.size(); ++i) {
    const auto ids = encode(tok, strings[i], true, false);
    const auto split = encode(tok, strings[i], false, false);
    const auto add = encode(tok, strings[i], true, true);
    const bool ok = ids == expected[i].ids && split == expected[i].split && add == expected[i].add;
    if (!ok && ++mismatches <= 5) {
      first << (label + " string ") << i << " \"" << escape(strings[i])
            << "\"\n  hf:     " << join(expected[i].ids) << " | " << join(expected[i].split)
            << " | " << join(expected[i].add) << "\n  tandem: " << join(ids) << " | " << join(split)
            << " | " << join(add) << "\n";
    }
  }
  *report = first.str();
  return mismatches;
}

void check_vocab(const std::string& name) {
  const auto strings = fixture_strings();
  REQUIRE(strings.size() >= 1000);
  const auto expected = fixture_ids(name);
  auto gguf = Tokenizer::load_gguf(gguf_path(name));
  REQUIRE(gguf.ok());
  std::string report;
  const size_t gguf_mismatches =
      count_mismatches(gguf.value(), name + " (gguf)", strings, expected, &report);
  INFO(report);
  CHECK(gguf_mismatches == 0);
  const Tokenizer reloaded = export_and_reload(name);
  CHECK(reloaded.vocab_size() == gguf.value().vocab_size());
  CHECK(reloaded.bos_id() == gguf.value().bos_id());
  CHECK(reloaded.eos_id() == gguf.value().eos_id());
  CHECK(reloaded.add_bos() == gguf.value().add_bos());
  CHECK(reloaded.chat_template() == gguf.value().chat_template());
  const size_t reloaded_mismatches =
      count_mismatches(reloaded, name + " (tokenizer.json)", strings, expected, &report);
  INFO(report);
  CHECK(reloaded_mismatches == 0);
  // Decoding agrees too (the decoder of the exported file is the GGUF's).
  for (size_t i = 0; i < strings.size(); ++i) {
    auto a = gguf.value().decode(expected[i].ids, DecodeOptions{});
    auto b = reloaded.decode(expected[i].ids, DecodeOptions{});
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    INFO(name << " string " << i);
    CHECK(a.value() == b.value());
  }
}

TEST_CASE("qwen2: GGUF and exported tokenizer.json match HF tokenizers", "[tokenizer][hf]") {
  check_vocab("qwen2");
}
TEST_CASE("llama-bpe: GGUF and exported tokenizer.json match HF tokenizers", "[tokenizer][hf]") {
  check_vocab("llama-bpe");
}
TEST_CASE("gpt-2: GGUF and exported tokenizer.json match HF tokenizers", "[tokenizer][hf]") {
  check_vocab("gpt-2");
}
TEST_CASE("deepseek-llm: GGUF and exported tokenizer.json match HF tokenizers", "[tokenizer][hf]") {
  check_vocab("deepseek-llm");
}
TEST_CASE("deepseek-coder: GGUF and exported tokenizer.json match HF tokenizers",
          "[tokenizer][hf]") {
  check_vocab("deepseek-coder");
}
TEST_CASE("llama-spm: GGUF and exported tokenizer.json match HF tokenizers", "[tokenizer][hf]") {
  check_vocab("llama-spm");
}
TEST_CASE("tiny-moe: GGUF and exported tokenizer.json match HF tokenizers", "[tokenizer][hf]") {
  check_vocab("tiny-moe");
}

TEST_CASE("the committed tiny-moe tokenizer directory loads and matches HF", "[tokenizer][hf]") {
  auto tok = Tokenizer::load_hf(kFixtures + "/tiny-moe");
  INFO(tok.status().to_string());
  REQUIRE(tok.ok());
  CHECK(tok.value().vocab_size() == 2051);
  CHECK(tok.value().eos_id() == 2048);
  CHECK(tok.value().pad_id() == 2048);
  CHECK(tok.value().kind() == TokenizerKind::kByteLevelBpe);
  CHECK(tok.value().chat_template().find("<|im_start|>") != std::string::npos);
  std::string report;
  const size_t mismatches = count_mismatches(tok.value(), "tiny-moe dir", fixture_strings(),
                                             fixture_ids("tiny-moe"), &report);
  INFO(report);
  CHECK(mismatches == 0);
}

}  // namespace
}  // namespace tandem::tokenizer
