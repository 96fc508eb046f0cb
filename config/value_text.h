// The text forms of configuration values: integers, byte sizes with unit suffixes, comma lists,
// quoted strings, and the nearest-spelling suggestion for unknown names. Pure functions,
// thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace tandem::config {

// Decimal integer with an optional leading '+' or '-'; no spaces, no other characters.
// The error message says what is wrong with the text only (the caller names source and key).
Result<int64_t> parse_integer(std::string_view text);

// A byte count: a plain integer ("1073741824") or a number with a unit, optionally separated by
// spaces: B; KB, MB, GB, TB (powers of 1000); KiB, MiB, GiB, TiB (powers of 1024); K, M, G, T are
// the binary units. Units are case-insensitive. A fraction ("1.5GB") is allowed when the result
// is a whole number of bytes. Negative numbers and overflow past 2^64-1 are errors.
Result<uint64_t> parse_byte_size(std::string_view text);

// "1GiB", "512MiB" when the value is an exact multiple of a binary unit, otherwise the plain
// number of bytes ("1500000000"). parse_byte_size(format_byte_size(x)) == x.
std::string format_byte_size(uint64_t bytes);

// "a, b,,c " -> {"a", "b", "c"}: split on commas, spaces trimmed, empty items dropped.
std::vector<std::string> split_list(std::string_view text);

// A double-quoted YAML string with \\, \" and control characters escaped.
std::string quote_string(std::string_view text);

// Levenshtein distance (insertions, deletions, substitutions, each cost 1).
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` by edit_distance (case-insensitive), or "" when none is close
// enough to be a plausible misspelling (distance above max(2, |word| / 3)). Ties: the first.
std::string nearest_spelling(std::string_view word, std::span<const std::string> candidates);

}  // namespace tandem::config
