// Tests of the BF16 x BF16 dot product (quant_dot.h) and the BF16 activation format: the rounding
// of activations to bfloat16, the scalar reference against a double-precision sum, every SIMD
// variant this CPU runs against the reference within the summation bound, split invariance, and
// the BF16 row of the weight-type table in both matmul modes.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/cpu_features.h"
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

uint16_t bf16_of(float f) {
  return fp32_to_bf16_bits(std::bit_cast<uint32_t>(f));
}

TEST_CASE("float -> bf16 rounds to nearest even and keeps NaNs", "[kernels][bf16]") {
  CHECK(bf16_of(1.0f) == 0x3f80);
  CHECK(bf16_of(-2.5f) == 0xc020);
  // 1 + 2^-8 is half-way between 1 and 1 + 2^-7: ties to even (down); 1 + 3 * 2^-8 ties up.
  CHECK(bf16_of(1.0f + 0x1p-8f) == 0x3f80);
  CHECK(bf16_of(1.0f + 3 * 0x1p-8f) == 0x3f82);
  CHECK(bf16_of(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81);                      // above half-way: up
  CHECK(bf16_of(std::numeric_limits<float>::max()) == 0x7f80);              // overflow to inf
  CHECK(bf16_of(0x1p-140f) == (std::bit_cast<uint32_t>(0x1p-140f) >> 16));  // subnormal kept
  const uint16_t nan = bf16_of(std::bit_cast<float>(0x7f800001u));  // signaling, low payload
  CHECK((nan & 0x7f80) == 0x7f80);
  CHECK((nan & 0x7f) != 0);  // still a NaN, quiet
  QuantizedActivations q;
  quantize_activations(ActivationFormat::kBF16, std::vector<float>{1.0f, -3.0f, 0.1f}, 1, 3, q);
  CHECK(q.bf16[0] == 0x3f80);
  CHECK(q.bf16[1] == 0xc040);
  CHECK(q.bf16[2] == bf16_of(0.1f));
  const ActivationRows v = view_of(q);
  CHECK(v.bf16 == q.bf16.data());
  CHECK(v.f32 == nullptr);
}

struct Case {
  std::vector<uint8_t> w;  // rows x cols bf16, row_bytes = 2 * cols
  QuantizedActivations x;
  size_t rows = 0, cols = 0, tokens = 0;
};

Case random_case(size_t rows, size_t cols, size_t tokens, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Case c{.w = std::vector<uint8_t>(2 * rows * cols),
         .x = {},
         .rows = rows,
         .cols = cols,
         .tokens = tokens};
  for (size_t i = 0; i < rows * cols; ++i) {
    const uint16_t b = bf16_of(normal(rng) * (i % 53 == 0 ? 1e-3f : 1.0f));
    std::memcpy(c.w.data() + 2 * i, &b, 2);
  }
  std::vector<float> xf(tokens * cols);
  for (float& f : xf) f = normal(rng);
  quantize_activations(ActivationFormat::kBF16, xf, tokens, cols, c.x);
  return c;
}

std::vector<float> run(detail::QuantDotFn fn, const Case& c, size_t r0, size_t r1) {
  std::vector<float> y(c.tokens * c.rows, NAN);
  fn(c.w.data() + r0 * 2 * c.cols, 2 * c.cols, r1 - r0, view_of(c.x), y.data() + r0, c.rows);
  return y;
}

TEST_CASE("BF16 x BF16 kernels match the scalar reference within the summation bound",
          "[kernels][bf16]") {
  const WeightTypeKernels* row = weight_type_kernels(TensorType::kBF16);
  REQUIRE(row != nullptr);
  CHECK(row->activations == ActivationFormat::kBF16);
  std::mt19937 rng(3);
  for (size_t cols : {size_t{1}, size_t{13}, size_t{32}, size_t{100}, size_t{2048}}) {
    for (size_t tokens : {size_t{1}, size_t{2}, size_t{5}}) {
      const size_t rows = 11;
      const Case c = random_case(rows, cols, tokens, rng);
      const std::vector<float> ref = run(detail::dot_bf16_scalar, c, 0, rows);
      // The reference against the exact sum (products are exact; only the float additions round).
      for (size_t t = 0; t < tokens; ++t) {
        for (size_t r = 0; r < rows; ++r) {
          double exact = 0.0, abs_sum = 0.0;
          for (size_t i = 0; i < cols; ++i) {
            uint16_t wb;
            std::memcpy(&wb, c.w.data() + 2 * (r * cols + i), 2);
            const double p =
                static_cast<double>(bf16_to_fp32(wb)) * bf16_to_fp32(c.x.bf16[t * cols + i]);
            exact += p;
            abs_sum += std::fabs(p);
          }
          CHECK(std::fabs(ref[t * rows + r] - exact) <= cols * kUnit * abs_sum + 1e-30);
        }
      }
      for (MatmulVariant v : kMatmulVariants) {
        if (v == MatmulVariant::kScalar || !matmul_variant_supported(v)) continue;
        INFO("variant " << matmul_variant_name(v) << " cols " << cols << " tokens " << tokens);
        const detail::QuantDotFn fn = row->dot[static_cast<size_t>(v)];
        const std::vector<float> got = run(fn, c, 0, rows);
        size_t bad = 0;
        for (size_t t = 0; t < tokens; ++t) {
          for (size_t r = 0; r < rows; ++r) {
            double abs_sum = 0.0;
            for (size_t i = 0; i < cols; ++i) {
              uint16_t wb;
              std::memcpy(&wb, c.w.data() + 2 * (r * cols + i), 2);
              abs_sum += std::fabs(static_cast<double>(bf16_to_fp32(wb)) *
                                   bf16_to_fp32(c.x.bf16[t * cols + i]));
            }
            const double tol = 2.0 * (static_cast<double>(cols) / 4 + 16) * kUnit * abs_sum + 1e-30;
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

TEST_CASE("BF16 weights: float activations in the float mode, BF16 in the quantized mode",
          "[kernels][bf16]") {
  CHECK(matmul_activation_format(TensorType::kBF16, MatmulActivations::kFloat) ==
        ActivationFormat::kF32);
  CHECK(matmul_activation_format(TensorType::kBF16, MatmulActivations::kQuantized) ==
        ActivationFormat::kBF16);
  std::mt19937 rng(9);
  const size_t rows = 7, cols = 300;
  const Case c = random_case(rows, cols, 1, rng);
  testing::check_modes_agree(TensorType::kBF16, c.w, rows, cols, rng);
}

}  // namespace
}  // namespace tandem::kernels
