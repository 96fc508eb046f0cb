// Tests of the F8_E4M3_B128 x BF16 dot product (quant_dot.h): the scalar reference against a
// double-precision sum, every code's value through every SIMD variant this CPU runs (exactly), the
// variants against the reference within the summation bound (9 and 33 tokens reach the converted
// float tiles of the AVX2 and AVX-512 entries), split invariance, and the type's row of the
// weight-type table in both matmul modes.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_dispatch.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/weight_matrix.h"
#include "kernels/cpu/weight_type_table.h"
#include "tests/kernels/bf16_activation_checks.h"

namespace tandem::kernels {
namespace {

constexpr double kUnit = 1.0 / 16777216.0;  // 2^-24
constexpr size_t kBlock = 128;
constexpr size_t kBlockBytes = 4 + kBlock;

bool is_nan_code(uint8_t c) {
  return (c & 0x7f) == 0x7f;
}

struct Case {
  std::vector<uint8_t> w;  // rows x blocks x (float scale, 128 codes)
  QuantizedActivations x;
  size_t rows = 0, cols = 0, tokens = 0;
  size_t row_bytes() const { return cols / kBlock * kBlockBytes; }
  float scale(size_t r, size_t b) const {
    float s;
    std::memcpy(&s, w.data() + r * row_bytes() + b * kBlockBytes, 4);
    return s;
  }
  uint8_t code(size_t r, size_t i) const {
    return w[r * row_bytes() + i / kBlock * kBlockBytes + 4 + i % kBlock];
  }
};

// Random codes (every one but the NaN codes, which the converter refuses), scales from 2^-20 to
// 2^6 (the converter's limit is below 2^7) and normally distributed activations.
Case random_case(size_t rows, size_t blocks, size_t tokens, std::mt19937& rng) {
  Case c;
  c.rows = rows;
  c.cols = blocks * kBlock;
  c.tokens = tokens;
  c.w.resize(rows * c.row_bytes());
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> exponent(-20, 6);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t b = 0; b < blocks; ++b) {
      uint8_t* blk = c.w.data() + r * c.row_bytes() + b * kBlockBytes;
      const float s = std::ldexp(mantissa(rng), exponent(rng));
      std::memcpy(blk, &s, 4);
      for (size_t j = 0; j < kBlock; ++j) {
        uint8_t v;
        do v = static_cast<uint8_t>(byte(rng));
        while (is_nan_code(v));
        blk[4 + j] = v;
      }
    }
  }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> xf(tokens * c.cols);
  for (float& f : xf) f = normal(rng);
  quantize_activations(ActivationFormat::kBF16, xf, tokens, c.cols, c.x);
  return c;
}

std::vector<float> run(detail::QuantDotFn fn, const Case& c, size_t r0, size_t r1) {
  std::vector<float> y(c.tokens * c.rows, NAN);
  fn(c.w.data() + r0 * c.row_bytes(), c.row_bytes(), r1 - r0, view_of(c.x), y.data() + r0, c.rows);
  return y;
}

// The exact dot product of row r and token t (every term is exact in double) and the sum of the
// terms' magnitudes.
struct Exact {
  double value = 0.0, abs_sum = 0.0;
};

Exact exact_dot(const Case& c, size_t r, size_t t) {
  Exact e;
  for (size_t i = 0; i < c.cols; ++i) {
    const double p = static_cast<double>(fp8_e4m3_to_fp32(c.code(r, i))) *
                     bf16_to_fp32(c.x.bf16[t * c.cols + i]) * c.scale(r, i / kBlock);
    e.value += p;
    e.abs_sum += std::fabs(p);
  }
  return e;
}

const WeightTypeKernels& f8_row() {
  const WeightTypeKernels* row = weight_type_kernels(TensorType::kF8_E4M3_B128);
  REQUIRE(row != nullptr);
  return *row;
}

TEST_CASE("F8 x BF16: every code's value through every kernel, exactly", "[kernels][fp8]") {
  // One row holding all 254 non-NaN codes (then two zeros) and 256 one-hot activation rows: y[t] is
  // the single product value(code_t) * 1 * scale, exact in every variant.
  const size_t blocks = 2;
  Case c;
  c.rows = 1;
  c.cols = blocks * kBlock;
  c.tokens = c.cols;
  c.w.resize(c.row_bytes());
  const float scale = 0.5f;
  std::vector<uint8_t> codes;
  for (int v = 0; v < 256; ++v) {
    if (!is_nan_code(static_cast<uint8_t>(v))) codes.push_back(static_cast<uint8_t>(v));
  }
  codes.resize(c.cols, 0);
  for (size_t b = 0; b < blocks; ++b) {
    std::memcpy(c.w.data() + b * kBlockBytes, &scale, 4);
    std::memcpy(c.w.data() + b * kBlockBytes + 4, codes.data() + b * kBlock, kBlock);
  }
  std::vector<float> xf(c.tokens * c.cols, 0.0f);
  for (size_t t = 0; t < c.tokens; ++t) xf[t * c.cols + t] = 1.0f;
  quantize_activations(ActivationFormat::kBF16, xf, c.tokens, c.cols, c.x);
  const WeightTypeKernels& row = f8_row();
  for (MatmulVariant v : kMatmulVariants) {
    if (!matmul_variant_supported(v)) continue;
    INFO("variant " << matmul_variant_name(v));
    const std::vector<float> y = run(row.dot[static_cast<size_t>(v)], c, 0, 1);
    size_t bad = 0;
    for (size_t t = 0; t < c.tokens; ++t) {
      const float want = fp8_e4m3_to_fp32(codes[t]) * scale;
      if (std::bit_cast<uint32_t>(y[t]) != std::bit_cast<uint32_t>(want) &&
          !(want == 0.0f && y[t] == 0.0f)) {
        ++bad;
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("F8 x BF16 kernels match the scalar reference within the summation bound",
          "[kernels][fp8]") {
  const WeightTypeKernels& row = f8_row();
  CHECK(row.activations == ActivationFormat::kBF16);
  std::mt19937 rng(17);
  for (size_t blocks : {size_t{1}, size_t{3}, size_t{16}}) {
    for (size_t tokens : {size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{9}, size_t{33}}) {
      const size_t rows = 11;
      const Case c = random_case(rows, blocks, tokens, rng);
      const std::vector<float> ref = run(detail::dot_f8_b128_scalar, c, 0, rows);
      // The reference rounds each block's running sum (128 additions), the product with the
      // scale and the block-order sum.
      for (size_t t = 0; t < tokens; ++t) {
        for (size_t r = 0; r < rows; ++r) {
          const Exact e = exact_dot(c, r, t);
          const double bound = (kBlock + blocks + 2) * kUnit * e.abs_sum + 1e-30;
          CHECK(std::fabs(ref[t * rows + r] - e.value) <= bound);
        }
      }
      for (MatmulVariant v : kMatmulVariants) {
        if (v == MatmulVariant::kScalar || !matmul_variant_supported(v)) continue;
        INFO("variant " << matmul_variant_name(v) << " blocks " << blocks << " tokens " << tokens);
        const detail::QuantDotFn fn = row.dot[static_cast<size_t>(v)];
        const std::vector<float> got = run(fn, c, 0, rows);
        size_t bad = 0;
        for (size_t t = 0; t < tokens; ++t) {
          for (size_t r = 0; r < rows; ++r) {
            const Exact e = exact_dot(c, r, t);
            const double tol =
                (static_cast<double>(c.cols) / 4 + 160 + 2.0 * blocks) * kUnit * e.abs_sum + 1e-30;
            if (!(std::fabs(static_cast<double>(got[t * rows + r]) - ref[t * rows + r]) <= tol)) {
              ++bad;
            }
          }
        }
        CHECK(bad == 0);
        // A row range (a thread pool's split) gives the same bits, and nothing outside it.
        CHECK(testing::split_mismatches(got, run(fn, c, 3, 9), tokens, rows, 3, 9) == 0);
      }
    }
  }
}

TEST_CASE("F8 weights: float activations in the float mode, BF16 in the quantized mode",
          "[kernels][fp8]") {
  CHECK(matmul_activation_format(TensorType::kF8_E4M3_B128, MatmulActivations::kFloat) ==
        ActivationFormat::kF32);
  CHECK(matmul_activation_format(TensorType::kF8_E4M3_B128, MatmulActivations::kQuantized) ==
        ActivationFormat::kBF16);
  std::mt19937 rng(23);
  const size_t rows = 7, blocks = 3;
  const Case c = random_case(rows, blocks, 1, rng);
  testing::check_modes_agree(TensorType::kF8_E4M3_B128, c.w, rows, c.cols, rng);
}

}  // namespace
}  // namespace tandem::kernels
