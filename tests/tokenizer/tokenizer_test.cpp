// Tests for Tokenizer: llama.cpp's golden vocab cases, round trips, special tokens, bad input.
#include "engine/tokenizer/tokenizer.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/tokenizer/vocab_fixture.h"

namespace tandem::tokenizer {
namespace {

using testing::join;
using testing::vocab;
using testing::vocab_cases;

std::vector<int32_t> encode(const Tokenizer& tok, const std::string& text, bool parse_special,
                            bool add_special = false) {
  auto ids = tok.encode(text, EncodeOptions{add_special, parse_special});
  INFO(ids.status().to_string());
  REQUIRE(ids.ok());
  return std::move(ids).value();
}

std::string decode(const Tokenizer& tok, const std::vector<int32_t>& ids,
                   DecodeOptions options = {}) {
  auto text = tok.decode(ids, options);
  INFO(text.status().to_string());
  REQUIRE(text.ok());
  return std::move(text).value();
}

// Every case of <name>.inp/.out, tokenized without BOS/EOS and without parsing specials.
void check_golden(const std::string& name) {
  const Tokenizer& tok = vocab(name);
  const auto cases = vocab_cases(name);
  REQUIRE(cases.size() >= 46);
  size_t failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto got = encode(tok, cases[i].input, false);
    if (got != cases[i].expected) ++failures;
    INFO(name << " case " << i << ": input \"" << testing::escape(cases[i].input)
              << "\"\n  expected: " << join(cases[i].expected) << "\n  got:      " << join(got));
    CHECK(got == cases[i].expected);
  }
  CHECK(failures == 0);
}

TEST_CASE("qwen2 vocab matches llama.cpp's expected ids", "[tokenizer][golden]") {
  check_golden("qwen2");
}
TEST_CASE("qwen35 vocab matches llama.cpp's expected ids", "[tokenizer][golden]") {
  check_golden("qwen35");
}
TEST_CASE("llama-bpe vocab matches llama.cpp's expected ids", "[tokenizer][golden]") {
  check_golden("llama-bpe");
}
TEST_CASE("deepseek-llm vocab matches llama.cpp's expected ids", "[tokenizer][golden]") {
  check_golden("deepseek-llm");
}
TEST_CASE("deepseek-coder vocab matches llama.cpp's expected ids", "[tokenizer][golden]") {
  check_golden("deepseek-coder");
}
TEST_CASE("gpt-2 vocab matches llama.cpp's expected ids", "[tokenizer][golden]") {
  check_golden("gpt-2");
}
TEST_CASE("llama-spm vocab matches llama.cpp's expected ids", "[tokenizer][golden]") {
  check_golden("llama-spm");
}
TEST_CASE("phi-3 vocab matches llama.cpp's expected ids", "[tokenizer][golden]") {
  check_golden("phi-3");
}

TEST_CASE("decode(encode(x)) == x for every golden input", "[tokenizer]") {
  for (const char* name : {"qwen2", "qwen35", "llama-bpe", "deepseek-llm", "deepseek-coder",
                           "gpt-2", "llama-spm", "phi-3"}) {
    const Tokenizer& tok = vocab(name);
    for (const auto& c : vocab_cases(name)) {
      INFO(name << ": \"" << testing::escape(c.input) << "\"");
      CHECK(decode(tok, encode(tok, c.input, false)) == c.input);
    }
  }
}

TEST_CASE("loaded metadata: kinds, special ids, add_bos", "[tokenizer]") {
  const Tokenizer& qwen = vocab("qwen2");
  CHECK(qwen.kind() == TokenizerKind::kByteLevelBpe);
  CHECK(qwen.pre_tokenizer_name() == "qwen2");
  CHECK(qwen.vocab_size() == 151936);
  CHECK(qwen.eos_id() == 151643);
  CHECK(qwen.token_text(151644) == "<|im_start|>");
  CHECK(qwen.token_type(151644) == TokenType::kControl);

  const Tokenizer& spm = vocab("llama-spm");
  CHECK(spm.kind() == TokenizerKind::kSentencePiece);
  CHECK(spm.vocab_size() == 32000);
  CHECK(spm.bos_id() == 1);
  CHECK(spm.eos_id() == 2);
  CHECK(spm.add_bos());
  CHECK(spm.add_space_prefix());
  CHECK(spm.token_type(3) == TokenType::kByte);  // <0x00>

  const Tokenizer& deepseek = vocab("deepseek-llm");
  CHECK(deepseek.add_bos());
  CHECK(deepseek.bos_id() == 100000);
}

TEST_CASE("add_special prepends BOS where the vocab asks for it", "[tokenizer]") {
  const Tokenizer& spm = vocab("llama-spm");
  const auto plain = encode(spm, "Hello world", false);
  auto with_bos = encode(spm, "Hello world", false, true);
  REQUIRE(with_bos.size() == plain.size() + 1);
  CHECK(with_bos.front() == 1);
  CHECK(std::vector<int32_t>(with_bos.begin() + 1, with_bos.end()) == plain);
  // Decoding drops the space prefix after BOS and can leave BOS out.
  CHECK(decode(spm, with_bos, {.skip_special = true}) == "Hello world");
  CHECK(decode(spm, with_bos) == "<s>Hello world");

  const Tokenizer& deepseek = vocab("deepseek-llm");
  CHECK(encode(deepseek, "Hello", false, true).front() == 100000);
  // qwen2 does not add BOS.
  const Tokenizer& qwen = vocab("qwen2");
  CHECK(encode(qwen, "Hello", false, true) == encode(qwen, "Hello", false, false));
}

TEST_CASE("parse_special matches <|im_start|> as one token only when enabled", "[tokenizer]") {
  const Tokenizer& qwen = vocab("qwen2");
  const std::string text = "<|im_start|>user\nHi<|im_end|>";
  const auto parsed = encode(qwen, text, true);
  const auto body = encode(qwen, "user\nHi", false);
  std::vector<int32_t> expected{151644};
  expected.insert(expected.end(), body.begin(), body.end());
  expected.push_back(151645);
  CHECK(parsed == expected);

  const auto literal = encode(qwen, text, false);
  CHECK(std::find(literal.begin(), literal.end(), 151644) == literal.end());
  CHECK(std::find(literal.begin(), literal.end(), 151645) == literal.end());
  CHECK(literal.size() > parsed.size());
  CHECK(decode(qwen, literal) == text);
  CHECK(decode(qwen, parsed) == text);
  CHECK(decode(qwen, parsed, {.skip_special = true}) == "user\nHi");

  // Longest match: "<|endoftext|>" must not be cut short by a shorter special token.
  CHECK(encode(qwen, "<|endoftext|>", true) == std::vector<int32_t>{151643});
}

TEST_CASE("SPM: specials split the text, each fragment gets the space prefix", "[tokenizer]") {
  const Tokenizer& spm = vocab("llama-spm");
  const auto ids = encode(spm, "Hi</s>Hi", true);
  const auto hi = encode(spm, "Hi", false);
  std::vector<int32_t> expected = hi;
  expected.push_back(2);
  expected.insert(expected.end(), hi.begin(), hi.end());
  CHECK(ids == expected);
  const auto literal = encode(spm, "Hi</s>Hi", false);
  CHECK(std::find(literal.begin(), literal.end(), 2) == literal.end());
}

TEST_CASE("invalid UTF-8 input is tokenized with U+FFFD in place of bad bytes", "[tokenizer]") {
  for (const char* name : {"qwen2", "llama-spm"}) {
    const Tokenizer& tok = vocab(name);
    INFO(name);
    CHECK(encode(tok,
                 "a\xFF"
                 "b",
                 false) == encode(tok,
                                  "a\xEF\xBF\xBD"
                                  "b",
                                  false));
    // A truncated 3-byte sequence is one maximal subpart: one U+FFFD.
    CHECK(encode(tok, "x\xE4\xB8", false) == encode(tok, "x\xEF\xBF\xBD", false));
    // A surrogate encoding: three ill-formed bytes, three U+FFFD.
    CHECK(encode(tok, "\xED\xA0\x80", false) ==
          encode(tok, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", false));
    CHECK(decode(tok, encode(tok, "ok\xC0\xAF", false)) == "ok\xEF\xBF\xBD\xEF\xBF\xBD");
  }
}

TEST_CASE("decode rejects ids outside the vocabulary", "[tokenizer]") {
  const Tokenizer& qwen = vocab("qwen2");
  const std::vector<int32_t> bad{1, 151936};
  auto result = qwen.decode(bad, {});
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == StatusCode::kInvalidArgument);
  const std::vector<int32_t> negative{-1};
  CHECK_FALSE(qwen.decode(negative, {}).ok());
}

TEST_CASE("1 MB without spaces tokenizes and round-trips", "[tokenizer][slow]") {
  const std::string letters(1 << 20, 'a');
  std::string cjk;
  while (cjk.size() < (1 << 20)) cjk += "\xE4\xB8\xAD\xE6\x96\x87";  // 中文
  for (const char* name : {"qwen2", "llama-bpe", "deepseek-llm", "llama-spm"}) {
    const Tokenizer& tok = vocab(name);
    for (const std::string* text : {&letters, static_cast<const std::string*>(&cjk)}) {
      INFO(name);
      const auto ids = encode(tok, *text, false);
      CHECK(ids.size() < text->size() / 2);
      CHECK(decode(tok, ids) == *text);
    }
  }
}

}  // namespace
}  // namespace tandem::tokenizer
