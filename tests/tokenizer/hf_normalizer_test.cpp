// Tests for tokenizer.json Unicode normalizers (NFC/NFD/NFKC/NFKD) against HF `tokenizers` ids,
// and for the normalizers that stay refused (Lowercase).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode_normalizer.h"
#include "tests/tokenizer/vocab_fixture.h"

namespace tandem::tokenizer {
namespace {

const std::string kFixtures = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/tokenizer/";

// Checks every line of normalizers/<variant>.ids.jsonl; returns the number of strings checked.
size_t check_variant(const std::string& variant) {
  std::istringstream lines(testing::read_file(kFixtures + "normalizers/" + variant + ".ids.jsonl"));
  std::string line;
  REQUIRE(std::getline(lines, line));
  auto root = nlohmann::json::parse(testing::read_file(kFixtures + "tiny-moe/tokenizer.json"));
  root["normalizer"] = nlohmann::json::parse(line).at("normalizer");
  auto tok = Tokenizer::from_hf_json(root.dump(), "", variant);
  INFO(variant << ": " << tok.status().to_string());
  REQUIRE(tok.ok());
  size_t cases = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    EncodeOptions options;
    options.add_special = false;
    options.parse_special = true;
    auto ids = tok.value().encode(j.at("text").get<std::string>(), options);
    INFO(line);
    REQUIRE(ids.ok());
    CHECK(ids.value() == j.at("ids").get<std::vector<int32_t>>());
    ++cases;
  }
  return cases;
}

TEST_CASE("NFC/NFD/NFKC/NFKD normalizers give HF tokenizers' ids", "[tokenizer][hf]") {
  for (const char* variant : {"nfc", "nfd", "nfkc", "nfkd", "seq-nfkc"}) {
    CHECK(check_variant(variant) == 200);
  }
}

TEST_CASE("a Qwen2-style directory with an NFC normalizer loads", "[tokenizer][hf]") {
  auto tok = Tokenizer::load_hf(kFixtures + "normalizers/nfc");
  INFO(tok.status().to_string());
  REQUIRE(tok.ok());
  auto precomposed = tok.value().encode("caf\xC3\xA9", EncodeOptions{});
  auto decomposed = tok.value().encode("cafe\xCC\x81", EncodeOptions{});
  REQUIRE(precomposed.ok());
  REQUIRE(decomposed.ok());
  CHECK(precomposed.value() == decomposed.value());
}

TEST_CASE("normalize_unicode applies the four forms", "[tokenizer]") {
  // U+212B ANGSTROM SIGN: canonical singleton to U+00C5; U+FB01 LATIN SMALL LIGATURE FI.
  const std::string text = "\xE2\x84\xAB\xEF\xAC\x81";
  auto nfc = normalize_unicode(UnicodeForm::kNfc, text);
  auto nfd = normalize_unicode(UnicodeForm::kNfd, text);
  auto nfkc = normalize_unicode(UnicodeForm::kNfkc, text);
  auto nfkd = normalize_unicode(UnicodeForm::kNfkd, text);
  REQUIRE((nfc.ok() && nfd.ok() && nfkc.ok() && nfkd.ok()));
  CHECK(nfc.value() == "\xC3\x85\xEF\xAC\x81");
  CHECK(nfd.value() == "A\xCC\x8A\xEF\xAC\x81");
  CHECK(nfkc.value() ==
        "\xC3\x85"
        "fi");
  CHECK(nfkd.value() ==
        "A\xCC\x8A"
        "fi");
  auto none = normalize_unicode(UnicodeForm::kNone, text);
  REQUIRE(none.ok());
  CHECK(none.value() == text);
}

// The tiny byte-level tokenizer.json of hf_split_test.cpp with the given normalizer.
std::string with_normalizer(const std::string& normalizer) {
  return R"({"version":"1.0","normalizer":)" + normalizer +
         R"(,"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},)"
         R"("decoder":{"type":"ByteLevel"},"model":{"type":"BPE",)"
         R"("vocab":{"a":0,"b":1,"ab":2,"Ġ":3},"merges":["a b"]}})";
}

TEST_CASE("Lowercase and unsupported normalizer orders are refused by name", "[tokenizer][hf]") {
  struct Case {
    const char* normalizer;
    const char* named;
  };
  for (const Case& c : {
           Case{R"({"type":"Lowercase"})", "Lowercase"},
           Case{R"({"type":"Sequence","normalizers":[{"type":"NFC"},{"type":"Lowercase"}]})",
                "Lowercase"},
           Case{R"({"type":"Sequence","normalizers":[{"type":"NFD"},{"type":"NFC"}]})",
                "several Unicode normalizers"},
           Case{R"({"type":"Sequence","normalizers":[{"type":"Replace","pattern":{"String":" "},)"
                R"("content":"▁"},{"type":"NFKC"}]})",
                "NFKC after Replace"},
       }) {
    auto tok = Tokenizer::from_hf_json(with_normalizer(c.normalizer), "", "tiny");
    INFO(c.normalizer);
    REQUIRE(!tok.ok());
    CHECK(tok.status().code() == StatusCode::kUnimplemented);
    CHECK(tok.status().to_string().find(c.named) != std::string::npos);
  }
  auto nfc = Tokenizer::from_hf_json(with_normalizer(R"({"type":"NFC"})"), "", "tiny");
  INFO(nfc.status().to_string());
  CHECK(nfc.ok());
}

}  // namespace
}  // namespace tandem::tokenizer
