// Tests of GgufFile on hostile files, one case per applicable row A1-A9 of the hardening
// checklist: each asserts the status code and that the message names the file, field and offset.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "engine/model/gguf_file.h"
#include "tests/model/gguf_builder.h"

namespace tandem::model {
namespace {

using tandem::testing::GgufBuilder;

constexpr uint64_t kMax64 = UINT64_MAX;

Status parse_error(const std::vector<uint8_t>& bytes) {
  Result<GgufFile> r = GgufFile::parse(bytes, "bad.gguf");
  REQUIRE_FALSE(r.ok());
  return r.status();
}

// Checks code and that the message contains "bad.gguf: offset <offset>: " and every fragment.
void expect_error(const std::vector<uint8_t>& bytes, StatusCode code, uint64_t offset,
                  std::initializer_list<std::string> fragments) {
  const Status s = parse_error(bytes);
  INFO(s.to_string());
  CHECK(s.code() == code);
  CHECK_THAT(s.message(), Catch::StartsWith("bad.gguf: offset " + std::to_string(offset) + ": "));
  for (const std::string& f : fragments) CHECK_THAT(s.message(), Catch::Contains(f));
}

void patch_u64(std::vector<uint8_t>& bytes, uint64_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

std::vector<uint8_t> valid_file() {
  GgufBuilder b;
  b.kv_string("general.architecture", "qwen3moe")
      .kv_string_array("tokenizer.ggml.tokens", {"a", "b", "c"})
      .tensor("w", 0, {4, 2})
      .tensor("v", 1, {8});
  return b.build();
}

TEST_CASE("A1: empty, truncated, bad magic and unsupported versions", "[gguf][hostile]") {
  expect_error({}, StatusCode::kInvalidArgument, 0, {"magic", "empty"});
  expect_error({'G', 'G'}, StatusCode::kInvalidArgument, 0, {"magic", "truncated"});
  std::vector<uint8_t> bytes = valid_file();
  bytes[0] = 'X';
  expect_error(bytes, StatusCode::kInvalidArgument, 0, {"magic", "not a GGUF file"});

  expect_error(GgufBuilder(1).build(), StatusCode::kUnimplemented, 4, {"v1", "not supported"});
  expect_error(GgufBuilder(4).build(), StatusCode::kUnimplemented, 4, {"version 4"});
  expect_error(GgufBuilder(0x03000000).build(), StatusCode::kUnimplemented, 4, {"big-endian"});

  // Every proper prefix of a valid file fails cleanly (and never reads past the end).
  const std::vector<uint8_t> full = valid_file();
  REQUIRE(GgufFile::parse(full, "bad.gguf").ok());
  for (size_t n = 0; n < full.size(); ++n) {
    CAPTURE(n);
    const std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));
    const Status s = parse_error(prefix);
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(s.message(), Catch::StartsWith("bad.gguf: offset "));
  }
  // A truncated header names the field being read.
  const std::vector<uint8_t> header(full.begin(), full.begin() + 12);
  expect_error(header, StatusCode::kInvalidArgument, 8, {"n_tensors", "truncated"});
}

TEST_CASE("A2: absurd counts and lengths are rejected before any allocation", "[gguf][hostile]") {
  std::vector<uint8_t> bytes = valid_file();
  const std::string size = "(" + std::to_string(bytes.size()) + " bytes)";
  patch_u64(bytes, 8, kMax64);
  expect_error(bytes, StatusCode::kInvalidArgument, 8,
               {"n_tensors 18446744073709551615 exceeds what the file", size});
  bytes = valid_file();
  patch_u64(bytes, 16, kMax64);
  expect_error(bytes, StatusCode::kInvalidArgument, 16, {"n_kv 18446744073709551615 exceeds"});

  // Array count: element type (4 bytes) then count (8) after key and value type.
  GgufBuilder b;
  b.kv_string_array("tokenizer.ggml.tokens", {"a", "b"});
  bytes = b.build();
  const uint64_t kv = b.offset_of("kv:tokenizer.ggml.tokens");
  const uint64_t count_at = kv + 8 + std::strlen("tokenizer.ggml.tokens") + 4 + 4;
  patch_u64(bytes, count_at, kMax64);
  expect_error(bytes, StatusCode::kInvalidArgument, count_at,
               {"key 'tokenizer.ggml.tokens' array count 18446744073709551615 exceeds"});
  patch_u64(bytes, count_at, (uint64_t{1} << 61) + 1);  // * 8 would wrap
  expect_error(bytes, StatusCode::kInvalidArgument, count_at, {"array count"});

  // String length of a key, of a value, of an array element.
  bytes = b.build();
  patch_u64(bytes, kv, kMax64);
  expect_error(bytes, StatusCode::kInvalidArgument, kv, {"metadata key #0 length", "exceeds"});
  GgufBuilder s;
  s.kv_string("general.name", "abc");
  bytes = s.build();
  const uint64_t value_at = s.offset_of("kv:general.name") + 8 + 12 + 4;
  patch_u64(bytes, value_at, kMax64 - 3);
  expect_error(bytes, StatusCode::kInvalidArgument, value_at, {"key 'general.name' length"});
  bytes = b.build();
  patch_u64(bytes, count_at + 8, kMax64);
  expect_error(bytes, StatusCode::kInvalidArgument, count_at + 8,
               {"'tokenizer.ggml.tokens'[0] length 18446744073709551615 exceeds"});
}

TEST_CASE("A3: dimension count, zero dims and size overflow", "[gguf][hostile]") {
  GgufBuilder b;
  b.tensor("t", 0, {1, 2, 3, 4, 5});
  expect_error(b.build(), StatusCode::kInvalidArgument, b.offset_of("tensor:t") + 9,
               {"tensor 't': n_dims 5"});
  GgufBuilder z;
  z.tensor("t", 0, {});
  expect_error(z.build(), StatusCode::kInvalidArgument, z.offset_of("tensor:t") + 9, {"n_dims 0"});
  GgufBuilder zero;
  zero.tensor("t", 0, {4, 0});
  expect_error(zero.build(), StatusCode::kInvalidArgument, zero.offset_of("tensor:t") + 9 + 4 + 8,
               {"tensor 't' ne[1] 0"});
  GgufBuilder neg;
  neg.tensor("t", 0, {kMax64});  // -1 as int64
  expect_error(neg.build(), StatusCode::kInvalidArgument, neg.offset_of("tensor:t") + 13,
               {"ne[0] 18446744073709551615"});

  GgufBuilder product;  // INT64_MAX x 2 elements
  product.tensor("t", 0, {uint64_t{INT64_MAX}, 2});
  expect_error(product.build(), StatusCode::kInvalidArgument,
               product.offset_of("tensor:t") + 13 + 8, {"tensor 't': size overflow"});
  GgufBuilder bytes_overflow;  // 2^62 F32 elements: count fits, bytes do not
  bytes_overflow.tensor("t", 0, {uint64_t{1} << 31, uint64_t{1} << 31});
  expect_error(bytes_overflow.build(), StatusCode::kInvalidArgument,
               bytes_overflow.offset_of("tensor:t") + 13 + 16, {"tensor 't': size overflow"});
  GgufBuilder big;  // 2^42+1 F32 elements: no overflow, but far past the end of the file
  big.tensor("t", 0, {(uint64_t{1} << 42) + 1});
  const std::vector<uint8_t> big_bytes = big.build();
  expect_error(big_bytes, StatusCode::kInvalidArgument, big.offset_of("tensor:t") + 25,
               {"tensor 't'", "past the end of the file"});
  GgufBuilder rows;  // Q8_0 rows must be whole 32-element blocks
  rows.tensor("t", 8, {16, 2}, std::nullopt, 34);
  expect_error(rows.build(), StatusCode::kInvalidArgument, rows.offset_of("tensor:t") + 9,
               {"ne[0] 16 is not a multiple", "block size 32"});
}

TEST_CASE("A4: unknown dtype, unknown value type, wrong type for general.alignment",
          "[gguf][hostile]") {
  GgufBuilder t;
  t.tensor("t", 4, {32});  // removed ggml type Q4_2
  expect_error(t.build(), StatusCode::kInvalidArgument, t.offset_of("tensor:t") + 21,
               {"tensor 't'", "unknown ggml tensor type id 4"});
  GgufBuilder t2;
  t2.tensor("t", 0xFFFFFFFF, {32});
  expect_error(t2.build(), StatusCode::kInvalidArgument, t2.offset_of("tensor:t") + 21,
               {"4294967295"});
  GgufBuilder v;
  v.kv_raw("k", 13, {0, 0, 0, 0});
  expect_error(v.build(), StatusCode::kInvalidArgument, v.offset_of("kv:k") + 9,
               {"key 'k': unknown value type 13"});
  GgufBuilder e;
  e.kv_raw("k", 9, GgufBuilder::array_payload(99, 0, {}));
  expect_error(e.build(), StatusCode::kInvalidArgument, e.offset_of("kv:k") + 13,
               {"unknown array element type 99"});
  GgufBuilder a;
  a.kv_i32("general.alignment", 32);
  expect_error(a.build(), StatusCode::kInvalidArgument, a.offset_of("kv:general.alignment") + 25,
               {"key 'general.alignment' has type INT32, expected UINT32"});
  GgufBuilder bad_bool;
  bad_bool.kv_raw("flag", 7, {2});
  expect_error(bad_bool.build(), StatusCode::kInvalidArgument, bad_bool.offset_of("kv:flag") + 16,
               {"BOOL value 2"});
}

TEST_CASE("A5: alignment zero or not a power of two, misaligned tensor offsets",
          "[gguf][hostile]") {
  for (uint32_t alignment : {0u, 3u, 48u}) {
    GgufBuilder a;
    a.kv_u32("general.alignment", alignment);
    expect_error(a.build(), StatusCode::kInvalidArgument, a.offset_of("kv:general.alignment") + 25,
                 {"alignment " + std::to_string(alignment) + " is not a power of two"});
  }
  GgufBuilder m;
  m.tensor("a", 0, {8}).tensor("b", 0, {8}, 40);
  expect_error(m.build(), StatusCode::kInvalidArgument, m.offset_of("tensor:b") + 8 + 1 + 4 + 8 + 4,
               {"tensor 'b': data offset 40 is not a multiple of the alignment 32"});
}

TEST_CASE("A6: tensor data past the end of the file and overlapping tensors", "[gguf][hostile]") {
  std::vector<uint8_t> bytes = valid_file();
  bytes.pop_back();  // the last tensor ("v", 16 bytes) loses its last byte
  GgufBuilder b;
  b.kv_string("general.architecture", "qwen3moe")
      .kv_string_array("tokenizer.ggml.tokens", {"a", "b", "c"})
      .tensor("w", 0, {4, 2})
      .tensor("v", 1, {8});
  b.build();
  expect_error(bytes, StatusCode::kInvalidArgument, b.offset_of("tensor:v") + 1 + 8 + 4 + 8 + 4,
               {"tensor 'v'", "past the end of the file (" + std::to_string(bytes.size())});

  GgufBuilder far;  // offset + data_offset wraps around 2^64
  far.tensor("t", 0, {8}, kMax64 - 31);
  expect_error(far.build(), StatusCode::kInvalidArgument, far.offset_of("tensor:t") + 25,
               {"tensor 't'", "past the end of the file"});

  GgufBuilder overlap;
  overlap.tensor("a", 0, {16}).tensor("b", 0, {8}, 32);  // a = [0, 64), b = [32, 64)
  expect_error(overlap.build(), StatusCode::kInvalidArgument, overlap.offset_of("tensor:b") + 25,
               {"tensor 'b'", "overlaps tensor 'a'"});
}

TEST_CASE("A7: duplicate names, over-long names and non-UTF-8 names", "[gguf][hostile]") {
  GgufBuilder k;
  k.kv_u32("x", 1).kv_u32("x", 2);
  expect_error(k.build(), StatusCode::kInvalidArgument, 24 + 8 + 1 + 4 + 4,
               {"key 'x' appears twice (first at offset 24)"});
  GgufBuilder t;
  t.tensor("w", 0, {8}).tensor("w", 0, {8});
  const std::vector<uint8_t> tb = t.build();
  expect_error(tb, StatusCode::kInvalidArgument, 24 + 8 + 1 + 4 + 8 + 4 + 8,
               {"tensor 'w' appears twice"});

  GgufBuilder ok_long;
  ok_long.tensor(std::string(256, 'n'), 0, {8});
  CHECK(GgufFile::parse(ok_long.build(), "ok.gguf").ok());
  GgufBuilder too_long;
  too_long.tensor(std::string(257, 'n'), 0, {8});
  expect_error(too_long.build(), StatusCode::kInvalidArgument, 24,
               {"tensor #0 name length 257 exceeds the limit of 256"});

  GgufBuilder bad_key;
  bad_key.kv_u32("a\xff", 1);
  expect_error(bad_key.build(), StatusCode::kInvalidArgument, 24,
               {"metadata key #0", "'a\\xff' is not valid UTF-8"});
  GgufBuilder overlong;  // overlong encoding of '/'
  overlong.tensor("x\xc0\xaf", 0, {8});
  expect_error(overlong.build(), StatusCode::kInvalidArgument, 24, {"not valid UTF-8"});
  GgufBuilder surrogate;
  surrogate.kv_u32("\xed\xa0\x80", 1);
  expect_error(surrogate.build(), StatusCode::kInvalidArgument, 24, {"not valid UTF-8"});
  GgufBuilder empty;
  empty.kv_u32("", 1);
  expect_error(empty.build(), StatusCode::kInvalidArgument, 24, {"metadata key #0 is empty"});
  GgufBuilder utf8;  // valid multi-byte names are fine
  utf8.kv_u32("ключ", 1).tensor("張量", 0, {8});
  CHECK(GgufFile::parse(utf8.build(), "ok.gguf").ok());
}

TEST_CASE("A9: nested arrays are depth-bounded", "[gguf][hostile]") {
  // ARRAY of ARRAY of UINT8: depth 2 is fine.
  std::vector<uint8_t> inner = GgufBuilder::array_payload(0, 2, {7, 9});
  GgufBuilder ok;
  ok.kv_raw("nested", 9, GgufBuilder::array_payload(9, 1, inner));
  const std::vector<uint8_t> ok_bytes = ok.build();
  Result<GgufFile> r = GgufFile::parse(ok_bytes, "ok.gguf");
  REQUIRE(r.ok());
  const GgufValue* v = r->find("nested");
  REQUIRE(v->array_type() == GgufType::kArray);
  CHECK(*v->element(0).element(1).to_u32() == 9);
  CHECK(v->debug_string() == "ARRAY[ARRAY x 1] [ARRAY[UINT8 x 2] [7, 9]]");

  // 1000 levels deep: rejected at the limit (4), no recursion past it.
  std::vector<uint8_t> payload = GgufBuilder::array_payload(0, 0, {});
  for (int i = 0; i < 1000; ++i) payload = GgufBuilder::array_payload(9, 1, payload);
  GgufBuilder deep;
  deep.kv_raw("deep", 9, payload);
  const Status s = parse_error(deep.build());
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("arrays nested deeper than 4 levels") &&
                              Catch::Contains("key 'deep'[0][0][0][0]"));

  // Breadth: many nested empty arrays cost memory, not file bytes; capped by the limit.
  std::vector<uint8_t> empties;
  for (int i = 0; i < 20; ++i) {
    const std::vector<uint8_t> e = GgufBuilder::array_payload(0, 0, {});
    empties.insert(empties.end(), e.begin(), e.end());
  }
  GgufBuilder wide;
  wide.kv_raw("wide", 9, GgufBuilder::array_payload(9, 20, empties));
  const std::vector<uint8_t> wide_bytes = wide.build();
  CHECK(GgufFile::parse(wide_bytes, "ok.gguf").ok());
  GgufLimits limits;
  limits.max_nested_array_elements = 10;
  Result<GgufFile> capped = GgufFile::parse(wide_bytes, "bad.gguf", limits);
  REQUIRE_FALSE(capped.ok());
  CHECK(capped.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(capped.status().message(),
             Catch::StartsWith("bad.gguf: offset " +
                               std::to_string(wide.offset_of("kv:wide") + 8 + 4 + 4)) &&
                 Catch::Contains("more than 10 nested array elements"));
}

}  // namespace
}  // namespace tandem::model
