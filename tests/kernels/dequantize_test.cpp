// Tests of the scalar dequantizers against gguf-py's (numpy) dequantize output.
#include "kernels/cpu/dequantize.h"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cpu/dequantize_rows.h"
#include "kernels/cpu/float_convert.h"

namespace tandem::kernels {
namespace {

// Fixtures written by scripts/fixtures/make_gguf_fixtures.py: <name>.bin holds raw blocks of the
// type, <name>.f32 the little-endian float32 output of gguf.quants.dequantize for them (numpy's
// astype(float32) for f64, which gguf-py does not dequantize).
std::vector<uint8_t> read_fixture(const std::string& name) {
  std::ifstream in(TANDEM_SOURCE_DIR "/tests/fixtures/gguf/dequant/" + name, std::ios::binary);
  REQUIRE(in.good());
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

uint32_t float_bits(float f) {
  return std::bit_cast<uint32_t>(f);
}

// Bit-equality, not a tolerance: every routine does the same float32 operations in the same order
// as gguf-py's numpy code (e.g. q4_K: (d * scale) * q - (dmin * min), each product rounded once;
// the library is built with -ffp-contract=off so no FMA merges a rounding), and the f16/bf16/f64
// conversions are exact or round-to-nearest-even in both. Comparing bits also pins NaN payloads
// and the sign of zero.
TEST_CASE("dequantize matches gguf-py bit for bit", "[kernels]") {
  const TensorType type =
      GENERATE(TensorType::kF32, TensorType::kF16, TensorType::kBF16, TensorType::kF64,
               TensorType::kQ4_0, TensorType::kQ4_1, TensorType::kQ5_0, TensorType::kQ5_1,
               TensorType::kQ8_0, TensorType::kQ2_K, TensorType::kQ3_K, TensorType::kQ4_K,
               TensorType::kQ5_K, TensorType::kQ6_K, TensorType::kIQ4_NL, TensorType::kIQ4_XS,
               TensorType::kIQ1_S, TensorType::kIQ1_M, TensorType::kIQ2_XXS, TensorType::kIQ2_XS,
               TensorType::kIQ2_S, TensorType::kIQ3_XXS, TensorType::kIQ3_S);
  const std::string name(tensor_type_name(type));
  INFO("type " << name);
  const std::vector<uint8_t> src = read_fixture(name + ".bin");
  const std::vector<uint8_t> ref_bytes = read_fixture(name + ".f32");
  REQUIRE(ref_bytes.size() % 4 == 0);
  const size_t n = ref_bytes.size() / 4;
  REQUIRE(n >= 64);
  std::vector<float> out(n, -12345.0f);
  const Status status = dequantize(type, src, out);
  REQUIRE(status.ok());
  size_t mismatches = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t want = load_le32(ref_bytes.data() + 4 * i);
    if (float_bits(out[i]) != want && mismatches++ < 5) {
      FAIL_CHECK("element " << i << ": got " << out[i] << " (0x" << std::hex << float_bits(out[i])
                            << "), gguf-py " << std::bit_cast<float>(want) << " (0x" << want << ")"
                            << std::dec);
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("dequantize reads blocks at any alignment", "[kernels]") {
  const TensorType type = GENERATE(TensorType::kQ4_K, TensorType::kQ8_0, TensorType::kF16);
  const std::string name(tensor_type_name(type));
  const std::vector<uint8_t> src = read_fixture(name + ".bin");
  const std::vector<uint8_t> ref_bytes = read_fixture(name + ".f32");
  std::vector<uint8_t> shifted(src.size() + 1);
  std::memcpy(shifted.data() + 1, src.data(), src.size());
  std::vector<float> out(ref_bytes.size() / 4);
  REQUIRE(dequantize(type, std::span<const uint8_t>(shifted).subspan(1), out).ok());
  CHECK(std::memcmp(out.data(), ref_bytes.data(), ref_bytes.size()) == 0);
}

// f16_to_f32.bin: numpy's float16 -> float32 for the halves 0..0x7fff, each stored as
// bits >> 13 in 3 bytes; the generator asserted that numpy's negative halves equal these with the
// sign bit set, so all 65536 patterns (subnormals, infinities, NaN payloads) are checked.
TEST_CASE("fp16 to fp32 is exact for all 65536 halves", "[kernels]") {
  const std::vector<uint8_t> table = read_fixture("f16_to_f32.bin");
  REQUIRE(table.size() == 3 * 32768);
  std::vector<uint8_t> all(2 * 65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    all[2 * h] = static_cast<uint8_t>(h);
    all[2 * h + 1] = static_cast<uint8_t>(h >> 8);
  }
  std::vector<float> out(65536);
  REQUIRE(dequantize(TensorType::kF16, all, out).ok());
  size_t mismatches = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t p = h & 0x7fffu;
    const uint32_t low =
        table[3 * p] | (uint32_t{table[3 * p + 1]} << 8) | (uint32_t{table[3 * p + 2]} << 16);
    const uint32_t want = (low << 13) | ((h & 0x8000u) << 16);
    const uint32_t got = fp16_to_fp32_bits(static_cast<uint16_t>(h));
    if ((got != want || float_bits(out[h]) != want) && mismatches++ < 5) {
      FAIL_CHECK("half 0x" << std::hex << h << ": got 0x" << got << " / 0x" << float_bits(out[h])
                           << ", numpy 0x" << want << std::dec);
    }
  }
  CHECK(mismatches == 0);
  // A few values worked by hand, so a wrong table would show up too.
  CHECK(fp16_to_fp32(0x3c00) == 1.0f);
  CHECK(fp16_to_fp32(0x0001) == 0x1p-24f);
  CHECK(fp16_to_fp32(0x7bff) == 65504.0f);
  CHECK(fp16_to_fp32(0xc000) == -2.0f);
}

TEST_CASE("bf16 to fp32 keeps the bits", "[kernels]") {
  CHECK(bf16_to_fp32(0x3f80) == 1.0f);
  CHECK(bf16_to_fp32(0xc0a0) == -5.0f);
  CHECK(float_bits(bf16_to_fp32(0x7fc1)) == 0x7fc10000u);
  CHECK(float_bits(bf16_to_fp32(0x0001)) == 0x00010000u);  // subnormal kept
}

TEST_CASE("fp8 e4m3 to fp32 matches torch for all 256 codes", "[kernels][fp8]") {
  // The values torch's float8_e4m3fn -> float32 cast gives, listed by
  // scripts/fixtures/make_hf_fixtures.py in the FP8 fixture's reference.json (NaN as null).
  std::ifstream in(TANDEM_SOURCE_DIR "/tests/fixtures/hf/deepseek_v3_fp8/reference.json");
  REQUIRE(in.good());
  const nlohmann::json values = nlohmann::json::parse(in).at("e4m3_values");
  REQUIRE(values.size() == 256);
  size_t mismatches = 0;
  for (uint32_t code = 0; code < 256; ++code) {
    const float got = fp8_e4m3_to_fp32(static_cast<uint8_t>(code));
    const bool same = values[code].is_null()
                          ? std::isnan(got)
                          : float_bits(got) == float_bits(values[code].get<float>());
    if (!same && mismatches++ < 5) FAIL_CHECK("code 0x" << std::hex << code << std::dec);
  }
  CHECK(mismatches == 0);
  CHECK(fp8_e4m3_to_fp32(0x38) == 1.0f);
  CHECK(fp8_e4m3_to_fp32(0x7e) == 448.0f);
  CHECK(fp8_e4m3_to_fp32(0x01) == 0x1p-9f);
  CHECK(float_bits(fp8_e4m3_to_fp32(0x80)) == 0x80000000u);  // -0
  // A block: the scale times each code's value, one rounding.
  std::vector<uint8_t> block(132);
  const float scale = 0.3f;
  std::memcpy(block.data(), &scale, 4);
  for (size_t j = 0; j < 128; ++j) block[4 + j] = static_cast<uint8_t>(j * 2);  // even: no NaN code
  std::vector<float> out(128);
  dequantize_f8_e4m3_b128(block.data(), out.data(), 1);
  for (size_t j = 0; j < 128; ++j) {
    CHECK(float_bits(out[j]) == float_bits(fp8_e4m3_to_fp32(static_cast<uint8_t>(j * 2)) * scale));
  }
}

TEST_CASE("dequantize rejects a source of the wrong size", "[kernels]") {
  std::vector<uint8_t> src(144 + 1);
  std::vector<float> dst(256);
  const Status status = dequantize(TensorType::kQ4_K, src, dst);
  REQUIRE(status.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(status.message(), Catch::Contains("144") && Catch::Contains("145") &&
                                   Catch::Contains("256") && Catch::Contains("q4_K"));

  std::vector<float> partial(33);  // not a whole number of q8_0 blocks
  const Status not_whole = dequantize(TensorType::kQ8_0, src, partial);
  REQUIRE(not_whole.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(not_whole.message(), Catch::Contains("33"));

  std::vector<uint8_t> short_src(2 * 7);
  std::vector<float> eight(8);
  CHECK(dequantize(TensorType::kF16, short_src, eight).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("dequantize of zero elements is OK", "[kernels]") {
  CHECK(dequantize(TensorType::kQ6_K, {}, {}).ok());
  CHECK(dequantize(TensorType::kF32, {}, {}).ok());
}

TEST_CASE("dequantize names an unsupported type", "[kernels]") {
  std::vector<uint8_t> src(54);
  std::vector<float> dst(256);
  const Status status = dequantize(TensorType::kTQ1_0, src, dst);
  REQUIRE(status.code() == StatusCode::kUnimplemented);
  CHECK_THAT(status.message(),
             Catch::Contains("tq1_0") && Catch::Contains("q4_K") && Catch::Contains("iq2_xxs"));
  CHECK_FALSE(dequantize_supported(TensorType::kTQ1_0));
  CHECK_FALSE(dequantize_supported(TensorType::kI32));
  CHECK(dequantize_supported(TensorType::kQ5_K));
  CHECK(dequantize(static_cast<TensorType>(4), src, dst).code() == StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace tandem::kernels
