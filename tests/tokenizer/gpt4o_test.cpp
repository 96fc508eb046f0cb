// Tests for the GPT-4o (o200k, gpt-oss) pre-tokenizer against HF `tokenizers` (fixtures from
// scripts/fixtures/make_gpt4o_fixtures.py): the split itself, and full encodes through the
// tokenizer.json, the gpt-4o GGUF vocab, and the tokenizer.json exported from that GGUF.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/model/gguf_file.h"
#include "engine/tokenizer/hf_tokenizer_json.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_export.h"
#include "tests/tokenizer/vocab_fixture.h"

namespace tandem::tokenizer {
namespace {

using testing::escape;
using testing::join;
using testing::read_file;

const std::string kDir = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/tokenizer/gpt-4o";
const std::string kGguf = kDir + "/ggml-vocab-gpt-4o.gguf";

struct Case {
  std::string text;
  std::vector<std::string> pieces;  // HF Split(o200k, isolated)
  std::vector<int32_t> ids;         // HF encode, added tokens matched, no post-processing
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = [] {
    std::vector<Case> out;
    std::istringstream lines(read_file(kDir + "/cases.jsonl"));
    std::string line;
    while (std::getline(lines, line)) {
      const auto j = nlohmann::json::parse(line);
      out.push_back({j.at("text").get<std::string>(),
                     j.at("pieces").get<std::vector<std::string>>(),
                     j.at("ids").get<std::vector<int32_t>>()});
    }
    return out;
  }();
  return all;
}

std::string join_pieces(const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& piece : pieces) out += "[" + escape(piece) + "]";
  return out;
}

// Every case's pieces from `pre`; returns the number of mismatching cases.
size_t split_mismatches(const PreTokenizer& pre, std::string* report) {
  size_t mismatches = 0;
  std::ostringstream first;
  for (const Case& c : cases()) {
    std::vector<std::string_view> views;
    REQUIRE(pre.split(c.text, views).ok());
    const std::vector<std::string> got(views.begin(), views.end());
    if (got != c.pieces && ++mismatches <= 8) {
      first << "\"" << escape(c.text) << "\"\n  hf:     " << join_pieces(c.pieces)
            << "\n  tandem: " << join_pieces(got) << "\n";
    }
  }
  *report = first.str();
  return mismatches;
}

// Every case's ids (and the decode of HF's ids) from `tok`; returns the number of mismatches.
size_t encode_mismatches(const Tokenizer& tok, std::string* report) {
  size_t mismatches = 0;
  std::ostringstream first;
  for (const Case& c : cases()) {
    auto ids = tok.encode(c.text, EncodeOptions{.add_special = false, .parse_special = true});
    REQUIRE(ids.ok());
    auto text = tok.decode(c.ids, DecodeOptions{});
    REQUIRE(text.ok());
    if ((ids.value() != c.ids || text.value() != c.text) && ++mismatches <= 8) {
      first << "\"" << escape(c.text) << "\"\n  hf:     " << join(c.ids)
            << "\n  tandem: " << join(ids.value()) << " (decode of hf: \"" << escape(text.value())
            << "\")\n";
    }
  }
  *report = first.str();
  return mismatches;
}

Tokenizer load_gguf() {
  auto tok = Tokenizer::load_gguf(kGguf);
  INFO(tok.status().to_string());
  REQUIRE(tok.ok());
  return std::move(tok).value();
}

TEST_CASE("gpt-4o pre-tokenizer splits as HF's o200k Split", "[tokenizer][hf]") {
  REQUIRE(cases().size() >= 600);
  auto pre = PreTokenizer::create("gpt-4o");
  INFO(pre.status().to_string());
  REQUIRE(pre.ok());
  std::string report;
  const size_t mismatches = split_mismatches(pre.value(), &report);
  INFO(report);
  CHECK(mismatches == 0);
}

TEST_CASE("gpt-4o hard cases split as expected", "[tokenizer]") {
  // A few cases spelled out, so a fixture regeneration that changed them would show.
  auto pre = PreTokenizer::create("gpt-4o");
  REQUIRE(pre.ok());
  const auto split = [&](std::string_view text) {
    std::vector<std::string_view> views;
    REQUIRE(pre.value().split(text, views).ok());
    return std::vector<std::string>(views.begin(), views.end());
  };
  using V = std::vector<std::string>;
  CHECK(split("I'M they'RE don't") == V{"I'M", " they'RE", " don't"});
  CHECK(split("x'sy") == V{"x's", "y"});
  CHECK(split("CamelCase HTTPServer") == V{"Camel", "Case", " HTTPServer"});
  CHECK(split("1234567") == V{"123", "456", "7"});
  CHECK(split("hello   world   ") == V{"hello", "  ", " world", "   "});
  CHECK(split("!\n/\nx") == V{"!\n/\n", "x"});
  CHECK(split("x \r\n y") == V{"x", " \r\n", " y"});
  // E + U+0301 + COLE: a mark is in both letter classes, so it ends the first word.
  CHECK(split("E\xCC\x81"
              "COLE") == V{"E\xCC\x81", "COLE"});
}

TEST_CASE("the gpt-oss style tokenizer.json is recognized as gpt-4o and encodes as HF",
          "[tokenizer][hf]") {
  auto tok = Tokenizer::load_hf(kDir);
  INFO(tok.status().to_string());
  REQUIRE(tok.ok());
  CHECK(tok.value().kind() == TokenizerKind::kByteLevelBpe);
  CHECK(tok.value().pre_tokenizer_name() == "gpt-4o");
  CHECK(tok.value().vocab_size() == 1600);
  CHECK(tok.value().eos_id() == 3);  // <|return|>
  CHECK(tok.value().pad_id() == 0);  // <|endoftext|>
  std::string report;
  const size_t mismatches = encode_mismatches(tok.value(), &report);
  INFO(report);
  CHECK(mismatches == 0);

  // The pre-tokenizer the tokenizer.json path builds splits as HF too.
  auto parts = parse_hf_tokenizer(read_file(kDir + "/tokenizer.json"), "");
  REQUIRE(parts.ok());
  REQUIRE(parts.value().pre != nullptr);
  CHECK(parts.value().pre->name() == "gpt-4o");
  const size_t split_errors = split_mismatches(*parts.value().pre, &report);
  INFO(report);
  CHECK(split_errors == 0);
}

TEST_CASE("a tokenizer.json Split that differs from o200k is not called gpt-4o", "[tokenizer]") {
  auto patterns = PreTokenizer::named_patterns("gpt-4o");
  REQUIRE(patterns.ok());
  REQUIRE(patterns.value().size() == 1);
  const std::string o200k(patterns.value()[0]);
  CHECK(PreTokenizer::name_of_rules({SplitRule{o200k}}) == "gpt-4o");
  CHECK_FALSE(PreTokenizer::name_of_rules({SplitRule{o200k + "|x"}}).has_value());
  CHECK_FALSE(
      PreTokenizer::name_of_rules({SplitRule{o200k, false, SplitBehavior::kRemoved}}).has_value());
  CHECK_FALSE(PreTokenizer::name_of_rules({SplitRule{o200k}, SplitRule{o200k}}).has_value());
  CHECK_FALSE(PreTokenizer::name_of_rules({}).has_value());
}

TEST_CASE("a gpt-4o GGUF vocab encodes as HF", "[tokenizer][hf]") {
  const Tokenizer tok = load_gguf();
  CHECK(tok.pre_tokenizer_name() == "gpt-4o");
  CHECK(tok.vocab_size() == 1600);
  CHECK(tok.eos_id() == 3);
  CHECK_FALSE(tok.add_bos());
  CHECK(tok.token_type(1) == TokenType::kControl);  // <|start|>
  std::string report;
  const size_t mismatches = encode_mismatches(tok, &report);
  INFO(report);
  CHECK(mismatches == 0);
}

TEST_CASE("exporting a gpt-4o GGUF writes the o200k Split, and the export encodes as HF",
          "[tokenizer][hf]") {
  auto file = model::GgufFile::open(kGguf);
  REQUIRE(file.ok());
  auto files = export_hf_tokenizer(file.value());
  INFO(files.status().to_string());
  REQUIRE(files.ok());
  const auto exported = nlohmann::json::parse(files.value().tokenizer_json);
  const auto original = nlohmann::json::parse(read_file(kDir + "/tokenizer.json"));
  const auto& steps = exported.at("pre_tokenizer").at("pretokenizers");
  REQUIRE(steps.size() == 2);
  // The very pattern HF's fixture tokenizer ran, byte for byte.
  CHECK(steps[0] == original.at("pre_tokenizer").at("pretokenizers")[0]);
  CHECK(steps[1].at("type") == "ByteLevel");
  CHECK(steps[1].at("use_regex") == false);
  CHECK(steps[1].at("add_prefix_space") == false);
  CHECK(exported.at("model").at("ignore_merges") == false);
  CHECK(exported.at("model").at("merges") == original.at("model").at("merges"));
  CHECK(exported.at("model").at("vocab") == original.at("model").at("vocab"));

  auto tok = Tokenizer::from_hf_json(files.value().tokenizer_json,
                                     files.value().tokenizer_config_json, "exported");
  INFO(tok.status().to_string());
  REQUIRE(tok.ok());
  CHECK(tok.value().pre_tokenizer_name() == "gpt-4o");
  CHECK(tok.value().eos_id() == 3);
  std::string report;
  const size_t mismatches = encode_mismatches(tok.value(), &report);
  INFO(report);
  CHECK(mismatches == 0);
}

TEST_CASE("unsupported pre-tokenizer names list gpt-4o among the supported", "[tokenizer]") {
  auto pre = PreTokenizer::create("no-such-pre");
  REQUIRE_FALSE(pre.ok());
  CHECK(pre.status().code() == StatusCode::kUnimplemented);
  CHECK(pre.status().to_string().find("gpt-4o") != std::string::npos);
  CHECK(pre.status().to_string().find("deepseek-coder") != std::string::npos);
  // Aliases still resolve.
  CHECK(PreTokenizer::create("gpt2").ok());
  CHECK(PreTokenizer::create("llama3").ok());
}

TEST_CASE("gpt-4o: 1 MB runs of one character class split and round-trip", "[tokenizer][slow]") {
  const Tokenizer tok = load_gguf();
  auto pre = PreTokenizer::create("gpt-4o");
  REQUIRE(pre.ok());
  const auto repeat = [](std::string_view unit) {
    std::string out;
    while (out.size() < (1 << 20)) out.append(unit);
    return out;
  };
  // Upper case (the first alternative backtracks over the run), lower case, CJK (Lo is in both
  // classes), combining marks alone, spaces before a letter, punctuation, digits.
  for (const std::string& text :
       {repeat("A"), repeat("a"), repeat("\xE4\xB8\xAD"), repeat("\xCC\x81"), repeat(" ") + "x",
        repeat("!"), repeat("7"), repeat("aB'S ")}) {
    INFO(escape(text.substr(0, 12)));
    std::vector<std::string_view> pieces;
    REQUIRE(pre.value().split(text, pieces).ok());
    size_t total = 0;
    for (std::string_view piece : pieces) total += piece.size();
    CHECK(total == text.size());
    auto ids = tok.encode(text, EncodeOptions{});
    REQUIRE(ids.ok());
    auto back = tok.decode(ids.value(), DecodeOptions{});
    REQUIRE(back.ok());
    CHECK(back.value() == text);
  }
}

}  // namespace
}  // namespace tandem::tokenizer
