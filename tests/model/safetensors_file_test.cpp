// Tests of the safetensors file parser: valid files and one case per hostile-input checklist row.
#include "engine/model/safetensors_file.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "tests/model/safetensors_test_util.h"

namespace tandem::model {
namespace {

using testing::as_span;
using testing::entry;
using testing::f32_bytes;
using testing::safetensors_bytes;
using testing::safetensors_bytes_with_length;

constexpr const char* kName = "bad.safetensors";

Status parse_status(const std::string& bytes) {
  return parse_safetensors(as_span(bytes), kName).status();
}

// Expects an error whose message holds the file name and every fragment given.
void expect_error(const std::string& bytes, StatusCode code,
                  std::initializer_list<std::string> fragments) {
  const Status st = parse_status(bytes);
  INFO(st.to_string());
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == code);
  CHECK_THAT(st.message(), Catch::Contains(kName));
  for (const std::string& f : fragments) CHECK_THAT(st.message(), Catch::Contains(f));
}

// A header with a single F32 tensor "w" of shape `shape` and offsets [0, end), plus `data`.
std::string one_tensor(const std::string& shape, uint64_t end, const std::string& data,
                       const std::string& dtype = "F32") {
  return safetensors_bytes("{" + entry("w", dtype, shape, 0, end) + "}", data);
}

TEST_CASE("a valid file yields tensors in offset order with views of their bytes", "[model]") {
  const std::string data =
      f32_bytes({1.5f, -2.0f, 3.25f, 4.0f, 5.0f, 6.0f}) + std::string("\x80\x3f\x00\x40", 4);
  // bf16 0x3f80 = 1.0, 0x4000 = 2.0 (little-endian bytes 80 3f, 00 40)
  const std::string header = "{\"__metadata__\": {\"format\": \"pt\"}, " +
                             entry("b.bf16", "BF16", "[2]", 24, 28) + ", " +
                             entry("a.weight", "F32", "[2, 3]", 0, 24) + "}  ";
  const std::string bytes = safetensors_bytes(header, data);
  Result<SafetensorsContents> r = parse_safetensors(as_span(bytes), "ok.safetensors");
  REQUIRE(r.ok());
  CHECK(r->metadata.size() == 1);
  CHECK(r->metadata.at("format") == "pt");
  CHECK(r->data_start == 8 + header.size());
  REQUIRE(r->tensors.size() == 2);
  const TensorInfo& a = r->tensors[0];
  CHECK(a.name == "a.weight");
  CHECK(a.type == TensorType::kF32);
  CHECK(a.shape == std::vector<uint64_t>{2, 3});
  CHECK(a.n_elements == 6);
  CHECK(a.file == "ok.safetensors");
  CHECK(a.file_offset == r->data_start);
  CHECK(a.data.data() == reinterpret_cast<const uint8_t*>(bytes.data()) + r->data_start);
  REQUIRE(a.data.size() == 24);
  float v[6];
  std::memcpy(v, a.data.data(), sizeof v);
  CHECK(v[0] == 1.5f);
  CHECK(v[5] == 6.0f);
  const TensorInfo& b = r->tensors[1];
  CHECK(b.name == "b.bf16");
  CHECK(b.type == TensorType::kBF16);
  CHECK(b.file_offset == r->data_start + 24);
  CHECK(b.data.size() == 4);
}

TEST_CASE("scalars, zero-sized tensors and a file without tensors are valid", "[model]") {
  const std::string header =
      "{" + entry("scalar", "F32", "[]", 0, 4) + ", " + entry("empty", "F16", "[0, 7]", 4, 4) + "}";
  Result<SafetensorsContents> r =
      parse_safetensors(as_span(safetensors_bytes(header, f32_bytes({7.0f}))), kName);
  REQUIRE(r.ok());
  REQUIRE(r->tensors.size() == 2);
  CHECK(r->tensors[0].name == "scalar");
  CHECK(r->tensors[0].n_elements == 1);
  CHECK(r->tensors[1].n_elements == 0);
  CHECK(r->tensors[1].data.empty());
  CHECK(parse_safetensors(as_span(safetensors_bytes("{}", "")), kName).ok());
  CHECK(parse_safetensors(as_span(safetensors_bytes("{\"__metadata__\": null}", "")), kName).ok());
}

TEST_CASE("A1: empty, truncated and headerless files are errors naming the file", "[model]") {
  expect_error("", StatusCode::kInvalidArgument, {"0 bytes"});
  expect_error(std::string("\x02\x00\x00", 3), StatusCode::kInvalidArgument, {"too short"});
  const std::string good = one_tensor("[2]", 8, f32_bytes({1, 2}));
  // Cut inside the header: N now exceeds what follows.
  expect_error(good.substr(0, 20), StatusCode::kOutOfRange, {"header length"});
  // Cut inside the data: the tensor runs past the end.
  expect_error(good.substr(0, good.size() - 1), StatusCode::kOutOfRange, {"\"w\"", "past the end"});
  expect_error(safetensors_bytes_with_length(0, "", ""), StatusCode::kInvalidArgument,
               {"too short"});
}

TEST_CASE("A2/A8: header length beyond the file or the 100 MB cap is refused", "[model]") {
  expect_error(safetensors_bytes_with_length(UINT64_MAX, "{}", ""), StatusCode::kResourceExhausted,
               {"18446744073709551615", "limit"});
  expect_error(safetensors_bytes_with_length(kSafetensorsMaxHeaderBytes + 1, "{}", ""),
               StatusCode::kResourceExhausted, {"100000001"});
  expect_error(safetensors_bytes_with_length(1000, "{}", ""), StatusCode::kOutOfRange,
               {"1000", "exceeds"});
}

TEST_CASE("A3: negative, fractional, oversized and overflowing shapes are refused", "[model]") {
  expect_error(one_tensor("[-2]", 8, f32_bytes({1, 2})), StatusCode::kInvalidArgument,
               {"\"w\"", "shape[0]", "-2"});
  expect_error(one_tensor("[2.5]", 8, f32_bytes({1, 2})), StatusCode::kInvalidArgument,
               {"shape[0]", "2.5"});
  expect_error(one_tensor("[\"2\"]", 8, f32_bytes({1, 2})), StatusCode::kInvalidArgument,
               {"shape[0]"});
  expect_error(one_tensor("4", 8, f32_bytes({1, 2})), StatusCode::kInvalidArgument, {"shape"});
  expect_error(one_tensor("[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]", 4, f32_bytes({1})),
               StatusCode::kInvalidArgument, {"17 dimensions"});
  // Element count overflows: 2^62 * 8.
  expect_error(one_tensor("[4611686018427387904, 8]", 8, f32_bytes({1, 2})),
               StatusCode::kInvalidArgument, {"\"w\"", "size overflow"});
  // Element count fits, byte size does not: 2^62 F32 elements.
  expect_error(one_tensor("[4611686018427387904]", 8, f32_bytes({1, 2})), StatusCode::kOutOfRange,
               {"\"w\"", "size overflow"});
  // A dimension beyond 64 bits parses as a float in JSON.
  expect_error(one_tensor("[18446744073709551616]", 8, f32_bytes({1, 2})),
               StatusCode::kInvalidArgument, {"shape[0]"});
}

TEST_CASE("A4: an unknown or missing dtype is an error that names it", "[model]") {
  expect_error(one_tensor("[2]", 8, f32_bytes({1, 2}), "Q9_X"), StatusCode::kInvalidArgument,
               {"\"w\"", "Q9_X"});
  expect_error(safetensors_bytes("{\"w\": {\"dtype\": 7, \"shape\": [], \"data_offsets\": [0, 4]}}",
                                 f32_bytes({1})),
               StatusCode::kInvalidArgument, {"\"w\"", "dtype"});
  expect_error(safetensors_bytes("{\"w\": [1, 2]}", ""), StatusCode::kInvalidArgument,
               {"\"w\"", "not an object"});
}

TEST_CASE("A6: bad data_offsets, past-EOF, overlapping, gapped and trailing data", "[model]") {
  const std::string d16 = f32_bytes({1, 2, 3, 4});
  auto two = [&](uint64_t b0, uint64_t e0, uint64_t b1, uint64_t e1, const std::string& data) {
    return safetensors_bytes(
        "{" + entry("x", "F32", "[2]", b0, e0) + ", " + entry("y", "F32", "[2]", b1, e1) + "}",
        data);
  };
  CHECK(parse_status(two(0, 8, 8, 16, d16)).ok());
  expect_error(two(0, 8, 4, 12, d16 + ""), StatusCode::kInvalidArgument,
               {"\"y\"", "overlap", "\"x\""});
  expect_error(two(0, 8, 12, 20, d16 + f32_bytes({5})), StatusCode::kInvalidArgument,
               {"\"y\"", "4 unused bytes"});
  expect_error(two(0, 8, 8, 16, d16 + "xx"), StatusCode::kInvalidArgument,
               {"2 bytes after the last tensor"});
  expect_error(two(0, 8, 8, 16, d16.substr(0, 12)), StatusCode::kOutOfRange,
               {"\"y\"", "past the end"});
  expect_error(two(4, 12, 12, 20, d16 + f32_bytes({5})), StatusCode::kInvalidArgument,
               {"\"x\"", "4 unused bytes"});
  // end < begin.
  expect_error(safetensors_bytes("{" + entry("w", "F32", "[0]", 8, 0) + "}", f32_bytes({1, 2})),
               StatusCode::kInvalidArgument, {"\"w\"", "before begin"});
  // Span does not match dtype x shape.
  expect_error(one_tensor("[3]", 8, f32_bytes({1, 2})), StatusCode::kInvalidArgument,
               {"\"w\"", "8 bytes", "needs 12"});
  // Offsets that would wrap: begin near 2^64.
  expect_error(safetensors_bytes("{" + entry("w", "F32", "[2]", UINT64_MAX - 8, UINT64_MAX) + "}",
                                 f32_bytes({1, 2})),
               StatusCode::kOutOfRange, {"\"w\"", "past the end"});
  for (const char* offsets : {"[0]", "[0, 8, 16]", "[\"0\", 8]", "[-8, 0]", "[0, 8.0]", "{}"}) {
    INFO(offsets);
    expect_error(
        safetensors_bytes("{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": " +
                              std::string(offsets) + "}}",
                          f32_bytes({1, 2})),
        StatusCode::kInvalidArgument, {"\"w\"", "data_offsets"});
  }
  expect_error(
      safetensors_bytes("{\"w\": {\"dtype\": \"F32\", \"shape\": [2]}}", f32_bytes({1, 2})),
      StatusCode::kInvalidArgument, {"\"w\"", "data_offsets"});
}

TEST_CASE("A7: duplicate, empty, overlong and non-UTF-8 tensor names are refused", "[model]") {
  const std::string d = f32_bytes({1, 2});
  expect_error(
      safetensors_bytes(
          "{" + entry("w", "F32", "[1]", 0, 4) + ", " + entry("w", "F32", "[1]", 4, 8) + "}", d),
      StatusCode::kInvalidArgument, {"duplicate key \"w\""});
  // A duplicate key inside __metadata__ is caught too.
  expect_error(safetensors_bytes("{\"__metadata__\": {\"k\": \"1\", \"k\": \"2\"}}", ""),
               StatusCode::kInvalidArgument, {"duplicate key \"k\""});
  expect_error(safetensors_bytes("{" + entry("", "F32", "[2]", 0, 8) + "}", d),
               StatusCode::kInvalidArgument, {"empty name"});
  expect_error(safetensors_bytes("{" + entry(std::string(5000, 'n'), "F32", "[2]", 0, 8) + "}", d),
               StatusCode::kInvalidArgument, {"5000 bytes"});
  expect_error(safetensors_bytes("{" + entry("w\xff\xfe", "F32", "[2]", 0, 8) + "}", d),
               StatusCode::kInvalidArgument, {"invalid JSON"});
}

TEST_CASE("A8: non-object headers, bad JSON and bad __metadata__ are refused", "[model]") {
  expect_error(safetensors_bytes("[1, 2, 3]", ""), StatusCode::kInvalidArgument,
               {"does not start with '{'"});
  expect_error(safetensors_bytes(" {}", ""), StatusCode::kInvalidArgument, {"'{'"});
  expect_error(safetensors_bytes("{\"w\": ", ""), StatusCode::kInvalidArgument, {"invalid JSON"});
  expect_error(safetensors_bytes("{} trailing", ""), StatusCode::kInvalidArgument,
               {"invalid JSON"});
  expect_error(safetensors_bytes("{\"__metadata__\": {\"k\": \"\xc3\x28\"}}", ""),
               StatusCode::kInvalidArgument, {"invalid JSON"});
  expect_error(safetensors_bytes("{\"__metadata__\": {\"step\": 5}}", ""),
               StatusCode::kInvalidArgument, {"__metadata__[\"step\"]", "not a string"});
  expect_error(safetensors_bytes("{\"__metadata__\": [\"a\"]}", ""), StatusCode::kInvalidArgument,
               {"__metadata__", "not an object"});
  // A NUL inside the header is not JSON either.
  expect_error(safetensors_bytes(std::string("{\"a\"\0: 1}", 9), ""), StatusCode::kInvalidArgument,
               {"invalid JSON"});
}

TEST_CASE("A9: deeply nested JSON is refused before parsing, without recursion", "[model]") {
  const int depth = 200000;
  const std::string deep =
      "{\"__metadata__\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
  expect_error(safetensors_bytes(deep, ""), StatusCode::kInvalidArgument, {"nests deeper than 64"});
  // Brackets inside strings do not count.
  const std::string in_string = "{\"__metadata__\": {\"k\": \"" + std::string(1000, '[') + "\"}}";
  CHECK(parse_status(safetensors_bytes(in_string, "")).ok());
  // Exactly at the limit is fine (metadata must be an object: nest inside a tensor entry instead
  // and the error is then about the entry, not the depth).
  const std::string at_limit = "{\"w\": " + std::string(kSafetensorsMaxJsonDepth - 1, '[') +
                               std::string(kSafetensorsMaxJsonDepth - 1, ']') + "}";
  expect_error(safetensors_bytes(at_limit, ""), StatusCode::kInvalidArgument, {"not an object"});
}

TEST_CASE("SafetensorsFile::open maps a file and names it in errors", "[model]") {
  testing::TempDir dir;
  const std::string good = dir.write("good.safetensors", one_tensor("[2]", 8, f32_bytes({3, 4})));
  Result<SafetensorsFile> f = SafetensorsFile::open(good);
  REQUIRE(f.ok());
  CHECK(f->path() == good);
  REQUIRE(f->find("w") != nullptr);
  CHECK(f->find("w")->file == good);
  CHECK(f->find("nope") == nullptr);
  float v[2];
  std::memcpy(v, f->find("w")->data.data(), sizeof v);
  CHECK(v[1] == 4.0f);
  // Moving keeps the views valid (the mapping does not move).
  SafetensorsFile moved = std::move(*f);
  std::memcpy(v, moved.tensors()[0].data.data(), sizeof v);
  CHECK(v[0] == 3.0f);

  const std::string empty = dir.write("empty.safetensors", "");
  const Status st = SafetensorsFile::open(empty).status();
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(st.message(), Catch::Contains(empty));
  CHECK(SafetensorsFile::open(dir.path() + "/missing.safetensors").status().code() ==
        StatusCode::kNotFound);
}

TEST_CASE("files written by the safetensors library parse with the right types", "[model]") {
  // fuzz/corpus/safetensors/ seeds, written by safetensors.numpy/torch save_file
  // (scripts/fixtures/make_hf_fixtures.py --fuzz-seeds).
  const std::string dir = std::string(TANDEM_SOURCE_DIR) + "/fuzz/corpus/safetensors/";
  Result<SafetensorsFile> mixed = SafetensorsFile::open(dir + "mixed_dtypes_metadata.safetensors");
  REQUIRE(mixed.ok());
  CHECK(mixed->metadata().at("format") == "pt");
  CHECK(mixed->metadata().at("note") == "seed");
  REQUIRE(mixed->tensors().size() == 5);
  CHECK(mixed->find("h")->type == TensorType::kF16);
  CHECK(mixed->find("h")->shape == std::vector<uint64_t>{3, 5});
  CHECK(mixed->find("flag")->type == TensorType::kBool);
  CHECK(mixed->find("u")->type == TensorType::kU8);
  CHECK(mixed->find("d")->type == TensorType::kF64);
  const TensorInfo* i = mixed->find("i");
  REQUIRE(i != nullptr);
  CHECK(i->type == TensorType::kI64);
  int64_t iv[6];
  REQUIRE(i->data.size() == sizeof iv);
  std::memcpy(iv, i->data.data(), sizeof iv);
  CHECK(iv[5] == 5);
  // The library pads the header with spaces to a multiple of 8 bytes.
  CHECK(mixed->data_start() % 8 == 0);

  Result<SafetensorsFile> scalar = SafetensorsFile::open(dir + "scalar_and_empty.safetensors");
  REQUIRE(scalar.ok());
  CHECK(scalar->find("s")->shape.empty());
  CHECK(scalar->find("e")->n_elements == 0);
  Result<SafetensorsFile> empty = SafetensorsFile::open(dir + "empty.safetensors");
  REQUIRE(empty.ok());
  CHECK(empty->tensors().empty());
  Result<SafetensorsFile> bf16 = SafetensorsFile::open(dir + "bf16.safetensors");
  REQUIRE(bf16.ok());
  CHECK(bf16->find("x")->type == TensorType::kBF16);
  CHECK(bf16->find("x")->data.size() == 64);
}

}  // namespace
}  // namespace tandem::model
