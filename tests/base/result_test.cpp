// Tests of Result<T>: value or error, and TANDEM_ASSIGN_OR_RETURN.
#include "base/result.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>

namespace tandem {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return out_of_range_error("value " + std::to_string(v) + " is not positive");
  return v;
}

Result<int> doubled(int v) {
  TANDEM_ASSIGN_OR_RETURN(const int x, parse_positive(v));
  return 2 * x;
}

TEST_CASE("Result holds a value", "[base]") {
  const Result<int> r = parse_positive(5);
  REQUIRE(r.ok());
  CHECK(r.value() == 5);
  CHECK(*r == 5);
  CHECK(r.status().ok());
}

TEST_CASE("Result holds an error", "[base]") {
  const Result<int> r = parse_positive(-3);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kOutOfRange);
  CHECK(r.status().message() == "value -3 is not positive");
}

TEST_CASE("TANDEM_ASSIGN_OR_RETURN propagates errors and unwraps values", "[base]") {
  CHECK(doubled(4).value() == 8);
  const Result<int> bad = doubled(0);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kOutOfRange);
}

TEST_CASE("Result works with move-only types", "[base]") {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  REQUIRE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  CHECK(*p == 7);
}

}  // namespace
}  // namespace tandem
