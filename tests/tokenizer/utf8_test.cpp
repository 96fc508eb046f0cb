// Tests for the UTF-8 helpers: maximal-subpart replacement as Unicode §3.9 specifies.
#include "engine/tokenizer/utf8.h"

#include <catch2/catch.hpp>

namespace tandem::tokenizer {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST_CASE("valid UTF-8 passes unchanged", "[tokenizer][utf8]") {
  const std::string s = "a\xC2\xBD\xE4\xB8\xAD\xF0\x9F\xA6\x99\x7F";
  CHECK(is_valid_utf8(s));
  CHECK(sanitize_utf8(s) == s);
  CHECK(is_valid_utf8(""));
}

TEST_CASE("ill-formed sequences become one U+FFFD per maximal subpart", "[tokenizer][utf8]") {
  // Unicode 15, Table 3-8: "61 F1 80 80 E1 80 C2 62 80 63 80 BF 64" -> a FFFD FFFD FFFD b FFFD
  // c FFFD FFFD d.
  const std::string in = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  const std::string expected =
      "a" + kFffd + kFffd + kFffd + "b" + kFffd + "c" + kFffd + kFffd + "d";
  CHECK_FALSE(is_valid_utf8(in));
  CHECK(sanitize_utf8(in) == expected);
  // Overlong, surrogate and beyond U+10FFFF: every byte is its own subpart.
  CHECK(sanitize_utf8("\xC0\xAF") == kFffd + kFffd);
  CHECK(sanitize_utf8("\xED\xA0\x80") == kFffd + kFffd + kFffd);
  CHECK(sanitize_utf8("\xF4\x90\x80\x80") == kFffd + kFffd + kFffd + kFffd);
  CHECK(sanitize_utf8("\xF0\x9F\x98") == kFffd);  // truncated at the end
}

TEST_CASE("utf8_step reports incomplete prefixes", "[tokenizer][utf8]") {
  CHECK(utf8_step("\xF0\x9F").kind == Utf8Step::kIncomplete);
  CHECK(utf8_step("\xF0\x9F\x98\x80").kind == Utf8Step::kValid);
  CHECK(utf8_step("\xF0\x9F\x98\x80").length == 4);
  CHECK(utf8_step("\xF0\x41").kind == Utf8Step::kInvalid);
  CHECK(utf8_step("\xF0\x41").length == 1);
}

}  // namespace
}  // namespace tandem::tokenizer
