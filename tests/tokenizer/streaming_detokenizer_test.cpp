// Tests for StreamingDetokenizer: equals whole decode, never emits partial UTF-8.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "tests/tokenizer/vocab_fixture.h"

namespace tandem::tokenizer {
namespace {

using testing::vocab;

struct Streamed {
  std::string text;
  std::vector<std::string> chunks;
  size_t held_back = 0;  // feeds after which bytes were held back
};

Streamed stream(const Tokenizer& tok, const std::vector<int32_t>& ids, DecodeOptions options = {}) {
  StreamingDetokenizer detok(tok, options);
  Streamed s;
  for (int32_t id : ids) {
    auto chunk = detok.feed(id);
    INFO(chunk.status().to_string());
    REQUIRE(chunk.ok());
    CHECK(is_valid_utf8(*chunk));
    if (detok.pending_bytes() > 0) ++s.held_back;
    s.chunks.push_back(*chunk);
    s.text += *chunk;
  }
  std::string tail = detok.flush();
  CHECK(is_valid_utf8(tail));
  s.text += tail;
  return s;
}

std::vector<int32_t> encode(const Tokenizer& tok, const std::string& text) {
  auto ids = tok.encode(text, {});
  REQUIRE(ids.ok());
  return *ids;
}

TEST_CASE("streamed decode equals whole decode on every golden input", "[tokenizer][stream]") {
  size_t held_back_total = 0;
  for (const char* name : {"qwen2", "llama-bpe", "deepseek-llm", "gpt-2", "llama-spm"}) {
    const Tokenizer& tok = vocab(name);
    for (const auto& c : testing::vocab_cases(name)) {
      INFO(name << ": \"" << testing::escape(c.input) << "\"");
      const auto whole = tok.decode(c.expected, {});
      REQUIRE(whole.ok());
      const Streamed s = stream(tok, c.expected);
      CHECK(s.text == *whole);
      held_back_total += s.held_back;
    }
  }
  // The inputs hold emoji and CJK text that some vocabs split across tokens.
  CHECK(held_back_total > 0);
}

TEST_CASE("SPM byte-fallback emoji is emitted only when complete", "[tokenizer][stream]") {
  const Tokenizer& spm = vocab("llama-spm");
  // U+1F999 is not in the Llama vocabulary: it becomes <0xF0><0x9F><0xA6><0x99>.
  const auto ids = encode(spm, "\xF0\x9F\xA6\x99!");
  const auto byte_f0 = std::find(ids.begin(), ids.end(), 3 + 0xF0);
  REQUIRE(byte_f0 != ids.end());
  const Streamed s = stream(spm, ids);
  CHECK(s.text == "\xF0\x9F\xA6\x99!");
  const auto at = static_cast<size_t>(byte_f0 - ids.begin());
  REQUIRE(at + 3 < s.chunks.size());
  CHECK(s.chunks[at] == "");
  CHECK(s.chunks[at + 1] == "");
  CHECK(s.chunks[at + 2] == "");
  CHECK(s.chunks[at + 3] == "\xF0\x9F\xA6\x99");
}

TEST_CASE("byte-level BPE CJK split across tokens is held back", "[tokenizer][stream]") {
  const Tokenizer& gpt2 = vocab("gpt-2");
  // GPT-2 has few CJK tokens: these characters are split into byte-level pieces.
  const std::string text = "\xE9\xBE\x98\xE9\xBE\x98 \xF0\x9F\x98\xB6\xE2\x80\x8D";
  const auto ids = encode(gpt2, text);
  const Streamed s = stream(gpt2, ids);
  CHECK(s.text == text);
  CHECK(s.held_back > 0);
}

TEST_CASE("an unfinished character at the end becomes U+FFFD on flush", "[tokenizer][stream]") {
  const Tokenizer& spm = vocab("llama-spm");
  StreamingDetokenizer detok(spm);
  auto a = detok.feed(3 + 0xE4);  // <0xE4>, first byte of a 3-byte character
  REQUIRE(a.ok());
  CHECK(*a == "");
  CHECK(detok.pending_bytes() == 1);
  auto b = detok.feed(3 + 0x41);  // 'A' breaks the sequence: U+FFFD then 'A'
  REQUIRE(b.ok());
  CHECK(*b ==
        "\xEF\xBF\xBD"
        "A");
  auto c = detok.feed(3 + 0xE4);
  REQUIRE(c.ok());
  CHECK(detok.flush() == "\xEF\xBF\xBD");
  CHECK(detok.pending_bytes() == 0);
  CHECK_FALSE(detok.feed(32000).ok());
}

}  // namespace
}  // namespace tandem::tokenizer
