// UTF-8 validation, replacement and code point conversion.
#include "engine/tokenizer/utf8.h"

namespace tandem::tokenizer {

Utf8Step utf8_step(std::string_view s) {
  const auto b0 = static_cast<uint8_t>(s[0]);
  if (b0 < 0x80) return {Utf8Step::kValid, 1};
  size_t need = 0;
  uint8_t lo = 0x80;  // allowed range of the second byte (excludes overlongs and surrogates)
  uint8_t hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {Utf8Step::kInvalid, 1};
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= s.size()) return {Utf8Step::kIncomplete, s.size()};
    const auto b = static_cast<uint8_t>(s[i]);
    const uint8_t min = i == 1 ? lo : 0x80;
    const uint8_t max = i == 1 ? hi : 0xBF;
    if (b < min || b > max) return {Utf8Step::kInvalid, i};
  }
  return {Utf8Step::kValid, need};
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const Utf8Step step = utf8_step(s.substr(i));
    if (step.kind != Utf8Step::kValid) return false;
    i += step.length;
  }
  return true;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    // Fast path for ASCII runs.
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      out.push_back(s[i++]);
      continue;
    }
    const Utf8Step step = utf8_step(s.substr(i));
    if (step.kind == Utf8Step::kValid) {
      out.append(s.substr(i, step.length));
    } else {
      out.append(kReplacementChar);
    }
    i += step.length;
  }
  return out;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t decode_utf8(std::string_view s, size_t* length) {
  const auto b0 = static_cast<uint8_t>(s[0]);
  const size_t n = utf8_length(b0);
  *length = n;
  if (n == 1) return b0;
  uint32_t cp = b0 & (0x7F >> n);
  for (size_t i = 1; i < n && i < s.size(); ++i) {
    cp = (cp << 6) | (static_cast<uint8_t>(s[i]) & 0x3F);
  }
  return cp;
}

}  // namespace tandem::tokenizer
