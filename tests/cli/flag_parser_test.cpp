// Tests of parse_flags: both value spellings, switches, help, and each error.
#include "cli/flag_parser.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace tandem::cli {
namespace {

constexpr std::string_view kWithValue[] = {"--model", "--threads"};
constexpr std::string_view kSwitches[] = {"--json"};

Result<ParsedFlags> parse(std::vector<std::string> args) {
  return parse_flags(args, kWithValue, kSwitches);
}

TEST_CASE("parse_flags reads --flag value, --flag=value and switches in order", "[cli]") {
  const Result<ParsedFlags> r = parse({"--model", "m.gguf", "--json", "--threads=4"});
  REQUIRE(r.ok());
  REQUIRE(r->flags.size() == 3);
  CHECK(r->flags[0].name == "--model");
  CHECK(r->flags[0].value == "m.gguf");
  CHECK(r->flags[1].name == "--json");
  CHECK(r->flags[1].value.empty());
  CHECK(r->flags[2].name == "--threads");
  CHECK(r->flags[2].value == "4");
  CHECK_FALSE(r->help);
}

TEST_CASE("parse_flags keeps '=' inside a value and stops at --help", "[cli]") {
  const Result<ParsedFlags> r = parse({"--model=a=b", "-h", "--bogus"});
  REQUIRE(r.ok());
  CHECK(r->help);
  REQUIRE(r->flags.size() == 1);
  CHECK(r->flags[0].value == "a=b");
}

TEST_CASE("parse_flags names what is wrong", "[cli]") {
  const auto unknown = parse({"--modle", "x"});
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().message() == "unknown argument \"--modle\"");
  const auto missing = parse({"--model"});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() == "--model needs a value");
  const auto switch_value = parse({"--json=1"});
  REQUIRE_FALSE(switch_value.ok());
  CHECK(switch_value.status().message() == "--json takes no value");
  const auto positional = parse({"model.gguf"});
  REQUIRE_FALSE(positional.ok());
  CHECK(positional.status().code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::cli
