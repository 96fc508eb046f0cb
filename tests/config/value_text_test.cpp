// Tests of the value text forms: integers, byte sizes with units, lists, quoting, suggestions.
#include "config/value_text.h"

#include <catch2/catch.hpp>
#include <limits>

namespace tandem::config {
namespace {

TEST_CASE("parse_integer accepts signed decimals and nothing else", "[config]") {
  CHECK(parse_integer("0").value() == 0);
  CHECK(parse_integer("50051").value() == 50051);
  CHECK(parse_integer("+7").value() == 7);
  CHECK(parse_integer("-12").value() == -12);
  CHECK(parse_integer("-9223372036854775808").value() == std::numeric_limits<int64_t>::min());
  CHECK(parse_integer("9223372036854775807").value() == std::numeric_limits<int64_t>::max());
  for (const char* bad : {"", "-", "1.5", "12abc", " 1", "0x10", "1e3", "true"}) {
    INFO(bad);
    const Result<int64_t> r = parse_integer(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("expected an integer") != std::string::npos);
  }
  CHECK(parse_integer("9223372036854775808").status().message().find("too large") !=
        std::string::npos);
}

TEST_CASE("parse_byte_size reads plain bytes and decimal and binary units", "[config]") {
  CHECK(parse_byte_size("0").value() == 0);
  CHECK(parse_byte_size("1073741824").value() == 1073741824ULL);
  CHECK(parse_byte_size("40GiB").value() == 40ULL * 1024 * 1024 * 1024);
  CHECK(parse_byte_size("512MiB").value() == 512ULL * 1024 * 1024);
  CHECK(parse_byte_size("1.5GB").value() == 1500000000ULL);
  CHECK(parse_byte_size("1.5GiB").value() == 1610612736ULL);
  CHECK(parse_byte_size("64 KiB").value() == 65536ULL);
  CHECK(parse_byte_size("2kb").value() == 2000ULL);
  CHECK(parse_byte_size("3G").value() == 3ULL << 30);
  CHECK(parse_byte_size("1TiB").value() == 1ULL << 40);
  CHECK(parse_byte_size("7B").value() == 7ULL);
  CHECK(parse_byte_size("18446744073709551615").value() == std::numeric_limits<uint64_t>::max());
}

TEST_CASE("parse_byte_size refuses bad units, signs, fractions of a byte and overflow",
          "[config]") {
  struct Case {
    const char* text;
    const char* says;
  };
  const Case cases[] = {
      {"-1GiB", "must not be negative"},      {"-5", "must not be negative"},
      {"40GiBs", "unknown size unit 'GiBs'"}, {"40 parsecs", "unknown size unit"},
      {"GiB", "expected a byte size"},        {"", "expected a byte size"},
      {"1.5", "not a whole number of bytes"}, {"1.0000001KB", "decimal places"},
      {"1.", "expected a byte size"},         {"18446744073709551616", "too large"},
      {"17179869184GiB", "too large"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    const Result<uint64_t> r = parse_byte_size(c.text);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find(c.says) != std::string::npos);
  }
}

TEST_CASE("format_byte_size uses the largest exact binary unit and round-trips", "[config]") {
  CHECK(format_byte_size(0) == "0");
  CHECK(format_byte_size(1ULL << 30) == "1GiB");
  CHECK(format_byte_size(512ULL << 20) == "512MiB");
  CHECK(format_byte_size(1536ULL << 20) == "1536MiB");
  CHECK(format_byte_size(1500000000ULL) == "1500000000");
  CHECK(format_byte_size(1000) == "1000");
  for (const uint64_t v : {0ULL, 1ULL, 1000ULL, 1ULL << 40, 3ULL << 10, 123456789ULL}) {
    CHECK(parse_byte_size(format_byte_size(v)).value() == v);
  }
}

TEST_CASE("split_list trims items and drops empty ones", "[config]") {
  CHECK(split_list("").empty());
  CHECK(split_list(" , ,").empty());
  CHECK(split_list("a") == std::vector<std::string>{"a"});
  CHECK(split_list(" key-one , key-two,,key3 ") ==
        std::vector<std::string>{"key-one", "key-two", "key3"});
}

TEST_CASE("quote_string escapes quotes, backslashes and control characters", "[config]") {
  CHECK(quote_string("") == "\"\"");
  CHECK(quote_string("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(quote_string("x\ny\t\x01") == "\"x\\ny\\t\\x01\"");
}

TEST_CASE("edit_distance and nearest_spelling find plausible misspellings only", "[config]") {
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("port", "port") == 0);
  const std::vector<std::string> keys = {"server.port", "server.host", "runtime.threads"};
  CHECK(nearest_spelling("server.prot", keys) == "server.port");
  CHECK(nearest_spelling("SERVER.HOTS", keys) == "server.host");
  CHECK(nearest_spelling("runtime.thread", keys) == "runtime.threads");
  CHECK(nearest_spelling("completely.different", keys).empty());
}

}  // namespace
}  // namespace tandem::config
