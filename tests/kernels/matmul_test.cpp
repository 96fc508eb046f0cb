// Tests of matmul (every weight type, float and Q8_0-activation paths), Q8_0 activation
// quantization and WeightMatrix/get_row against numpy + gguf-py references.
#include "kernels/cpu/matmul.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/weight_matrix.h"
#include "tests/kernels/kernel_fixture.h"

namespace tandem::kernels {
namespace {

using testing::KernelFixture;

constexpr double kUnit = 1.0 / 16777216.0;  // 2^-24, float's unit roundoff

struct Loaded {
  KernelFixture fx;
  size_t rows, cols, n_tokens;
  std::vector<uint8_t> w_bytes;
  std::vector<float> x;
  WeightMatrix w;
};

Loaded load(const std::string& name, TensorType type) {
  Loaded l{KernelFixture("matmul_" + name), 0, 0, 0, {}, {}, {}};
  l.rows = l.fx.params().at("rows").get<size_t>();
  l.cols = l.fx.params().at("cols").get<size_t>();
  l.n_tokens = l.fx.params().at("n_tokens").get<size_t>();
  l.w_bytes = l.fx.array<uint8_t>("w");
  l.x = l.fx.array<float>("x");
  Result<WeightMatrix> w = make_weight_matrix(type, l.w_bytes, l.rows, l.cols);
  REQUIRE(w.ok());
  l.w = *w;
  return l;
}

// Weights are converted exactly (dequantize is bit-equal to gguf-py), so the only error is the
// float dot product: |error| <= cols * 2^-24 * sum_c |x_c w_c| (the recursive-summation bound;
// the 8 partial sums only shorten the chains). For cols = 128..512 that is 8e-6..3e-5 of the
// absolute sum; a wrong element, block or scale is off by far more.
void check_float_result(const Loaded& l, const std::vector<float>& y) {
  const std::vector<double> want = l.fx.array<double>("y");
  const std::vector<double> abs_y = l.fx.array<double>("abs_y");
  REQUIRE(y.size() == want.size());
  for (size_t i = 0; i < y.size(); ++i) {
    INFO("token " << i / l.rows << " row " << i % l.rows);
    CHECK(std::fabs(y[i] - want[i]) <= static_cast<double>(l.cols) * kUnit * abs_y[i] + 1e-30);
  }
}

TEST_CASE("matmul matches numpy on gguf-py's weights for every type", "[kernels]") {
  const std::vector<std::pair<std::string, TensorType>> types = {
      {"f32", TensorType::kF32},   {"f16", TensorType::kF16},   {"bf16", TensorType::kBF16},
      {"q8_0", TensorType::kQ8_0}, {"q4_0", TensorType::kQ4_0}, {"q4_k", TensorType::kQ4_K},
      {"q6_k", TensorType::kQ6_K}};
  for (const auto& [name, type] : types) {
    SECTION(name) {
      const Loaded l = load(name, type);
      std::vector<float> y(l.n_tokens * l.rows, NAN);
      matmul(l.w, l.x, l.n_tokens, y);
      check_float_result(l, y);

      // Split into row ranges (as a thread pool would) and one token at a time: the same
      // arithmetic per element, so bit-equal to the whole call.
      std::vector<float> split(y.size(), NAN);
      const size_t mid = l.rows / 3;
      matmul_rows(l.w, l.x, l.n_tokens, split, mid, l.rows);
      matmul_rows(l.w, l.x, l.n_tokens, split, 0, mid);
      CHECK(split == y);
      for (size_t t = 0; t < l.n_tokens; ++t) {
        std::vector<float> one(l.rows, NAN);
        matmul(l.w, std::span<const float>(l.x).subspan(t * l.cols, l.cols), 1, one);
        CHECK(std::vector<float>(y.begin() + t * l.rows, y.begin() + (t + 1) * l.rows) == one);
      }
    }
  }
}

TEST_CASE("Q8_0 activation quantization is bit-equal to gguf-py's", "[kernels]") {
  const Loaded l = load("q8_0", TensorType::kQ8_0);
  const std::vector<uint8_t> want = l.fx.array<uint8_t>("x_q8_0");
  QuantizedActivations xq;
  quantize_activations(ActivationFormat::kQ8_0, l.x, l.n_tokens, l.cols, xq);
  REQUIRE(xq.d.size() * kQ8_0BlockBytes == want.size());
  for (size_t b = 0; b < xq.d.size(); ++b) {
    INFO("block " << b);
    const uint8_t* block = want.data() + b * kQ8_0BlockBytes;
    CHECK(fp32_to_fp16_bits(xq.d[b]) == load_le16(block));
    CHECK(xq.d[b] == fp16_to_fp32(load_le16(block)));
    for (size_t j = 0; j < kQ8_0BlockElements; ++j) {
      CHECK(xq.qs[b * kQ8_0BlockElements + j] == static_cast<int8_t>(block[2 + j]));
    }
  }
}

TEST_CASE("matmul with Q8_0 activations matches the int8 reference", "[kernels]") {
  const Loaded l = load("q8_0", TensorType::kQ8_0);
  const std::vector<double> want = l.fx.array<double>("y_q8_0");
  const std::vector<double> abs_terms = l.fx.array<double>("abs_y_q8_0");
  std::vector<float> y(l.n_tokens * l.rows, NAN);
  matmul(l.w, l.x, l.n_tokens, y, MatmulActivations::kQuantized);
  // Block sums are exact integers; each term adds two float roundings (d_w * d_x, then times the
  // sum) and the block-order float sum one per block: bound (blocks + 2) * 2^-24 * sum |term|.
  const double blocks = static_cast<double>(l.cols / kQ8_0BlockElements);
  for (size_t i = 0; i < y.size(); ++i) {
    INFO("token " << i / l.rows << " row " << i % l.rows);
    CHECK(std::fabs(y[i] - want[i]) <= (blocks + 2) * kUnit * abs_terms[i] + 1e-30);
  }
  // The quantized path really differs from the float one (activation rounding ~0.4%).
  std::vector<float> y_float(y.size());
  matmul(l.w, l.x, l.n_tokens, y_float);
  CHECK(y_float != y);
}

TEST_CASE("Q8_0 activation mode leaves other weight types on the float path", "[kernels]") {
  const Loaded l = load("f16", TensorType::kF16);
  std::vector<float> a(l.n_tokens * l.rows), b(l.n_tokens * l.rows);
  matmul(l.w, l.x, l.n_tokens, a, MatmulActivations::kQuantized);
  matmul(l.w, l.x, l.n_tokens, b, MatmulActivations::kFloat);
  CHECK(a == b);
  check_float_result(l, a);
}

TEST_CASE("get_row returns the dequantized embedding row", "[kernels]") {
  const Loaded l = load("q8_0", TensorType::kQ8_0);
  const std::vector<double> want = l.fx.array<double>("y");
  const std::vector<double> abs_y = l.fx.array<double>("abs_y");
  std::vector<float> row(l.cols);
  for (size_t r : {size_t{0}, size_t{7}, l.rows - 1}) {
    REQUIRE(get_row(l.w, r, row).ok());
    // The row dotted with token 0 reproduces the reference product of that row.
    const float got = dot_f32(l.x.data(), row.data(), l.cols);
    CHECK(std::fabs(got - want[r]) <= static_cast<double>(l.cols) * kUnit * abs_y[r]);
  }
  const Status out_of_range = get_row(l.w, l.rows, row);
  CHECK(out_of_range.code() == StatusCode::kOutOfRange);
  CHECK(out_of_range.message().find(std::to_string(l.rows)) != std::string::npos);
  std::vector<float> short_row(l.cols - 1);
  CHECK(get_row(l.w, 0, short_row).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("make_weight_matrix rejects bad sizes and types", "[kernels]") {
  std::vector<uint8_t> bytes(4 * 34);
  CHECK(make_weight_matrix(TensorType::kQ8_0, bytes, 4, 32).ok());
  // One byte short.
  const Result<WeightMatrix> short_data =
      make_weight_matrix(TensorType::kQ8_0, std::span<const uint8_t>(bytes).first(135), 4, 32);
  REQUIRE(!short_data.ok());
  CHECK(short_data.status().code() == StatusCode::kInvalidArgument);
  CHECK(short_data.status().message().find("136") != std::string::npos);
  // cols not a whole number of 32-element blocks.
  CHECK(make_weight_matrix(TensorType::kQ8_0, bytes, 4, 33).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(make_weight_matrix(TensorType::kQ8_0, bytes, 0, 32).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(make_weight_matrix(TensorType::kTQ1_0, bytes, 1, 256).status().code() ==
        StatusCode::kUnimplemented);
}

TEST_CASE("fp32_to_fp16_bits rounds to nearest even", "[kernels]") {
  // Every finite half survives the round trip through float.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) continue;  // NaN payloads: checked below
    INFO("half bits " << h);
    REQUIRE(fp32_to_fp16_bits(fp16_to_fp32(static_cast<uint16_t>(h))) == h);
  }
  // Half-way between two neighbours (exact in float) goes to the even one, subnormals included.
  for (uint16_t h : {uint16_t{0x0001}, uint16_t{0x0002}, uint16_t{0x03ff}, uint16_t{0x3c00},
                     uint16_t{0x3c01}, uint16_t{0x7bfe}, uint16_t{0x8401}}) {
    const float mid = (fp16_to_fp32(h) + fp16_to_fp32(static_cast<uint16_t>(h + 1))) / 2;
    const uint16_t even = (h & 1u) ? static_cast<uint16_t>(h + 1) : h;
    INFO("half bits " << h);
    CHECK(fp32_to_fp16_bits(mid) == even);
  }
  CHECK(fp32_to_fp16_bits(65519.0f) == 0x7bff);  // below the tie: the largest half
  CHECK(fp32_to_fp16_bits(65520.0f) == 0x7c00);  // the tie rounds to even: infinity
  CHECK(fp32_to_fp16_bits(-1e10f) == 0xfc00);
  CHECK(std::isnan(fp16_to_fp32(fp32_to_fp16_bits(NAN))));
  CHECK(fp32_to_fp16_bits(1e-9f) == 0);  // under half the smallest subnormal
}

}  // namespace
}  // namespace tandem::kernels
