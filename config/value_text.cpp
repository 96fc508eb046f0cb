// Parsing and printing of configuration value text: integers, byte sizes, lists, quoting, and
// nearest-spelling suggestions.
#include "config/value_text.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>

namespace tandem::config {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

struct Unit {
  std::string_view name;  // lower case
  uint64_t multiplier;
};

constexpr uint64_t kKi = uint64_t{1} << 10;
constexpr uint64_t kMi = uint64_t{1} << 20;
constexpr uint64_t kGi = uint64_t{1} << 30;
constexpr uint64_t kTi = uint64_t{1} << 40;

constexpr Unit kUnits[] = {
    {"", 1},
    {"b", 1},
    {"k", kKi},
    {"kib", kKi},
    {"kb", 1000},
    {"m", kMi},
    {"mib", kMi},
    {"mb", 1000 * 1000},
    {"g", kGi},
    {"gib", kGi},
    {"gb", 1000000000},
    {"t", kTi},
    {"tib", kTi},
    {"tb", 1000000000000},
};

// Most fraction digits accepted: 10^6 * 2^40 still fits in 64 bits.
constexpr size_t kMaxFractionDigits = 6;

std::string size_hint() {
  return "expected a byte size such as 1073741824, 512MiB or 1.5GB";
}

}  // namespace

Result<int64_t> parse_integer(std::string_view text) {
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  if (s.empty() || !std::all_of(s.begin(), s.end(), is_digit)) {
    return invalid_argument_error("expected an integer, got '" + std::string(text) + "'");
  }
  // Accumulate as a negative number so that INT64_MIN is representable.
  int64_t value = 0;
  for (const char c : s) {
    if (__builtin_mul_overflow(value, 10, &value) ||
        __builtin_sub_overflow(value, static_cast<int64_t>(c - '0'), &value)) {
      return invalid_argument_error("integer '" + std::string(text) + "' is too large");
    }
  }
  if (!negative) {
    if (value == std::numeric_limits<int64_t>::min()) {
      return invalid_argument_error("integer '" + std::string(text) + "' is too large");
    }
    value = -value;
  }
  return value;
}

Result<uint64_t> parse_byte_size(std::string_view text) {
  const std::string_view s = trim(text);
  const std::string quoted = "'" + std::string(text) + "'";
  if (!s.empty() && s.front() == '-') {
    return invalid_argument_error("byte size " + quoted + " must not be negative");
  }
  size_t pos = 0;
  uint64_t whole = 0;
  bool overflow = false;
  while (pos < s.size() && is_digit(s[pos])) {
    overflow |= __builtin_mul_overflow(whole, uint64_t{10}, &whole);
    overflow |= __builtin_add_overflow(whole, static_cast<uint64_t>(s[pos] - '0'), &whole);
    ++pos;
  }
  if (pos == 0) return invalid_argument_error(size_hint() + ", got " + quoted);
  uint64_t fraction = 0;
  uint64_t fraction_scale = 1;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    const size_t start = pos;
    while (pos < s.size() && is_digit(s[pos])) {
      if (pos - start >= kMaxFractionDigits) {
        return invalid_argument_error("byte size " + quoted + " has more than " +
                                      std::to_string(kMaxFractionDigits) + " decimal places");
      }
      fraction = fraction * 10 + static_cast<uint64_t>(s[pos] - '0');
      fraction_scale *= 10;
      ++pos;
    }
    if (pos == start) return invalid_argument_error(size_hint() + ", got " + quoted);
  }
  const std::string unit = lower(trim(s.substr(pos)));
  const Unit* found = nullptr;
  for (const Unit& u : kUnits) {
    if (u.name == unit) found = &u;
  }
  if (found == nullptr) {
    return invalid_argument_error("unknown size unit '" + std::string(trim(s.substr(pos))) +
                                  "' in " + quoted +
                                  " (use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)");
  }
  uint64_t bytes = 0;
  overflow |= __builtin_mul_overflow(whole, found->multiplier, &bytes);
  const uint64_t fraction_bytes_scaled = fraction * found->multiplier;  // < 10^6 * 2^40
  if (fraction_bytes_scaled % fraction_scale != 0) {
    return invalid_argument_error("byte size " + quoted + " is not a whole number of bytes");
  }
  overflow |= __builtin_add_overflow(bytes, fraction_bytes_scaled / fraction_scale, &bytes);
  if (overflow) return invalid_argument_error("byte size " + quoted + " is too large");
  return bytes;
}

std::string format_byte_size(uint64_t bytes) {
  if (bytes == 0) return "0";
  constexpr Unit kPrint[] = {{"TiB", kTi}, {"GiB", kGi}, {"MiB", kMi}, {"KiB", kKi}};
  for (const Unit& u : kPrint) {
    if (bytes % u.multiplier == 0)
      return std::to_string(bytes / u.multiplier) + std::string(u.name);
  }
  return std::to_string(bytes);
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view item = trim(text.substr(0, comma));
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

std::string quote_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string nearest_spelling(std::string_view word, std::span<const std::string> candidates) {
  const std::string w = lower(word);
  const size_t limit = std::max<size_t>(2, w.size() / 3);
  std::string best;
  size_t best_distance = limit + 1;
  for (const std::string& candidate : candidates) {
    const size_t d = edit_distance(w, lower(candidate));
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

}  // namespace tandem::config
