// UTF-8 helpers for the tokenizer: validation with U+FFFD replacement, code point decoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::tokenizer {

// The replacement character U+FFFD, UTF-8 encoded.
inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// What the bytes at the start of a buffer are, as UTF-8.
struct Utf8Step {
  enum Kind { kValid, kInvalid, kIncomplete };
  Kind kind;
  // kValid: the sequence length (1..4). kInvalid: the length of the maximal ill-formed subpart
  // (Unicode §3.9, "U+FFFD substitution of maximal subparts"), >= 1. kIncomplete: the whole
  // remaining input (a valid prefix of a sequence that needs more bytes).
  size_t length;
};

// Classifies the sequence starting at s[0]; s must not be empty.
Utf8Step utf8_step(std::string_view s);

// True when `s` is well-formed UTF-8 (no surrogates, no overlongs, <= U+10FFFF).
bool is_valid_utf8(std::string_view s);

// Replaces every maximal ill-formed subpart (and a truncated sequence at the end) with U+FFFD.
// Valid input is returned unchanged. The result is always valid UTF-8. Applying it to a stream
// chunk by chunk (holding back kIncomplete tails) gives the same result as applying it once.
std::string sanitize_utf8(std::string_view s);

// Length of the UTF-8 sequence whose lead byte is `lead` (1 for anything that is not a valid
// lead byte). For splitting text already known to be valid.
inline size_t utf8_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

// Appends the UTF-8 encoding of code point `cp` (must be a scalar value) to `out`.
void append_utf8(uint32_t cp, std::string& out);

// Decodes the valid sequence at s[0] (s valid UTF-8, non-empty); returns the code point.
uint32_t decode_utf8(std::string_view s, size_t* length);

}  // namespace tandem::tokenizer
