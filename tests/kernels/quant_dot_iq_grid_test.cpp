// Tests of the grid i-quant dot products (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S x
// Q8_K; quant_dot.h): the scalar references against dequantize() in double, the AVX2 and AVX-512
// VNNI variants bit-identical to them over many shapes and the full activation range, and the
// types' rows in the weight-type table.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_dispatch.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/weight_type_table.h"
#include "kernels/tensor_type.h"
#include "tests/kernels/quant_dot_test_support.h"

namespace tandem::kernels {
namespace {

using testing::bits_of;
using testing::have_avx2;
using testing::have_avx512_vnni;
using testing::run_strided;

constexpr double kUnit = 1.0 / 16777216.0;  // 2^-24, the float unit roundoff
constexpr size_t kSuper = 256;

struct GridType {
  const char* name;
  TensorType type;
  size_t block_bytes;
  detail::QuantDotFn scalar;
  detail::QuantDotFn avx2;
  detail::QuantDotFn avx512_vnni;
};

#if defined(__x86_64__) || defined(_M_X64)
#define TANDEM_IQ_X86(fn) &detail::fn
#else
#define TANDEM_IQ_X86(fn) nullptr
#endif

#define TANDEM_IQ_TYPE(name, type, bytes)                                         \
  GridType {                                                                      \
#name, TensorType::type, bytes, &detail::dot_##name##_scalar,                 \
        TANDEM_IQ_X86(dot_##name##_avx2), TANDEM_IQ_X86(dot_##name##_avx512_vnni) \
  }

const GridType kTypes[] = {
    TANDEM_IQ_TYPE(iq1_s, kIQ1_S, 50),     TANDEM_IQ_TYPE(iq1_m, kIQ1_M, 56),
    TANDEM_IQ_TYPE(iq2_xxs, kIQ2_XXS, 66), TANDEM_IQ_TYPE(iq2_xs, kIQ2_XS, 74),
    TANDEM_IQ_TYPE(iq2_s, kIQ2_S, 82),     TANDEM_IQ_TYPE(iq3_xxs, kIQ3_XXS, 98),
    TANDEM_IQ_TYPE(iq3_s, kIQ3_S, 110)};

detail::QuantDotFn simd_kernel(const GridType& k, const std::string& variant) {
  if (variant == "avx2") return have_avx2() ? k.avx2 : nullptr;
  return have_avx512_vnni() ? k.avx512_vnni : nullptr;
}

// Sets the f16 d of the block: at byte 0, or for IQ1_M spread over the top nibbles of its four
// scale words (bytes 49, 51, 53, 55).
void put_d(const GridType& k, uint8_t* block, uint16_t h) {
  if (k.type == TensorType::kIQ1_M) {
    for (int i = 0; i < 4; ++i) {
      uint8_t& b = block[49 + 2 * i];
      b = static_cast<uint8_t>((b & 0x0f) | ((h >> (4 * i)) & 0x0f) << 4);
    }
    return;
  }
  block[0] = static_cast<uint8_t>(h & 0xff);
  block[1] = static_cast<uint8_t>(h >> 8);
}

// rows x cols random blocks (every byte pattern of the codes is valid), d in +-[1e-3, 1e-2]; with
// `extremes` one block in 8 gets 0, a subnormal or +-65504 instead.
std::vector<uint8_t> random_weights(const GridType& k, size_t rows, size_t cols, size_t row_bytes,
                                    bool extremes, std::mt19937& rng) {
  std::vector<uint8_t> w(rows * row_bytes);
  for (uint8_t& v : w) v = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(1e-3f, 1e-2f);
  const uint16_t kEdges[] = {0x0000, 0x0001, 0x03ff, 0x8001, 0xfbff, 0x7bff};
  for (size_t r = 0; r < rows; ++r) {
    for (size_t b = 0; b < cols / kSuper; ++b) {
      uint16_t h = fp32_to_fp16_bits((rng() % 2 == 0 ? 1.0f : -1.0f) * scale(rng));
      if (extremes && rng() % 8 == 0) h = kEdges[rng() % 6];
      put_d(k, w.data() + r * row_bytes + b * k.block_bytes, h);
    }
  }
  return w;
}

// quantize_activations' rows of normal floats, or (`full_range`) quants drawn from all of
// -128..127 with random scales and their bsums.
QuantizedActivations make_activations(size_t n_tokens, size_t cols, bool full_range,
                                      std::mt19937& rng) {
  QuantizedActivations a =
      testing::random_activations(ActivationFormat::kQ8_K, n_tokens, cols, rng);
  if (!full_range) return a;
  for (int8_t& q : a.qs) q = static_cast<int8_t>(rng());
  std::uniform_real_distribution<float> d(1e-3f, 1e-1f);
  for (float& v : a.d) v = d(rng);
  for (size_t i = 0; i < a.bsums.size(); ++i) {
    int s = 0;
    for (size_t j = 0; j < kQ8_KSumElements; ++j) s += a.qs[i * kQ8_KSumElements + j];
    a.bsums[i] = static_cast<int16_t>(s);
  }
  return a;
}

// dequantize()'s weights times xq * dx, summed in double, and a bound on |kernel - that|. S = sum
// |w * xq * dx|: dequantize() rounds each weight twice (its group scale, then the product; IQ1's
// v + delta is exact), the kernel rounds (dw * factor) * dx, the product with float(isum) and
// float(isum) itself (above 2^24), and adds the blocks in order: (blocks + 6) u S.
struct Reference {
  double value = 0.0;
  double bound = 0.0;
};

Reference reference_dot(const GridType& k, const uint8_t* row, const QuantizedActivations& a,
                        size_t t) {
  const size_t cols = a.cols;
  const size_t blocks = cols / kSuper;
  std::vector<float> w(cols);
  REQUIRE(dequantize(k.type, std::span<const uint8_t>(row, blocks * k.block_bytes), w).ok());
  Reference ref;
  double total = 0.0;
  for (size_t e = 0; e < cols; ++e) {
    const double term = static_cast<double>(w[e]) * static_cast<double>(a.qs[t * cols + e]) *
                        static_cast<double>(a.d[t * blocks + e / kSuper]);
    ref.value += term;
    total += std::fabs(term);
  }
  ref.bound = (static_cast<double>(blocks) + 6.0) * kUnit * total;
  return ref;
}

TEST_CASE("grid i-quant scalar dot products match the dequantized values in double", "[kernels]") {
  std::mt19937 rng(20261203);
  for (const GridType& k : kTypes) {
    for (const size_t cols : {256u, 512u, 2048u}) {
      for (const bool full_range : {false, true}) {
        const size_t rows = 4, n_tokens = 3;
        const size_t row_bytes = cols / kSuper * k.block_bytes;
        const std::vector<uint8_t> w = random_weights(k, rows, cols, row_bytes, false, rng);
        const QuantizedActivations a = make_activations(n_tokens, cols, full_range, rng);
        std::vector<float> y(n_tokens * rows);
        k.scalar(w.data(), row_bytes, rows, view_of(a), y.data(), rows);
        for (size_t t = 0; t < n_tokens; ++t) {
          for (size_t r = 0; r < rows; ++r) {
            const Reference ref = reference_dot(k, w.data() + r * row_bytes, a, t);
            INFO(k.name << " cols " << cols << " full_range " << full_range << " token " << t
                        << " row " << r << ": " << y[t * rows + r] << " vs " << ref.value);
            CHECK(ref.bound > 0.0);
            CHECK(std::fabs(static_cast<double>(y[t * rows + r]) - ref.value) <= ref.bound);
          }
        }
      }
    }
  }
}

// Every SIMD kernel against the scalar one: row counts around the tiles, the 16-row lane groups
// and the tokens-in-lanes groups of 8 rows, token counts around the token groups (13 = 8 + 4 + 1
// in the many-token passes; from 16 the tokens in the lanes on AVX2: 22 pads a last register, 37
// leaves tokens to the other kernels),
// misaligned weights, padded row strides, y strides whose gaps stay untouched, extreme block
// scales, and activation quants from all of -128..127 in every other case.
void check_simd_against_scalar(const std::string& variant, uint32_t seed) {
  std::mt19937 rng(seed);
  size_t case_index = 0;
  for (const GridType& k : kTypes) {
    const detail::QuantDotFn fn = simd_kernel(k, variant);
    REQUIRE(fn != nullptr);
    for (const size_t rows : {1u, 3u, 4u, 5u, 9u, 17u, 33u}) {
      for (const size_t cols : {256u, 768u}) {
        for (const size_t n_tokens : {1u, 2u, 3u, 4u, 5u, 7u, 9u, 13u, 16u, 22u, 37u}) {
          ++case_index;
          const size_t misalign = 1 + case_index % 3;
          const size_t row_bytes = cols / kSuper * k.block_bytes + case_index % 5;
          const size_t y_stride = rows + 1 + case_index % 4;
          std::vector<uint8_t> buffer(misalign);
          const std::vector<uint8_t> w = random_weights(k, rows, cols, row_bytes, true, rng);
          buffer.insert(buffer.end(), w.begin(), w.end());
          const uint8_t* wp = buffer.data() + misalign;
          const QuantizedActivations a = make_activations(n_tokens, cols, case_index % 2 == 0, rng);
          const std::vector<float> want =
              run_strided(k.scalar, wp, row_bytes, rows, view_of(a), y_stride);
          const std::vector<float> got = run_strided(fn, wp, row_bytes, rows, view_of(a), y_stride);
          INFO(k.name << " " << variant << " rows " << rows << " cols " << cols << " tokens "
                      << n_tokens << " misalign " << misalign << " row_bytes " << row_bytes);
          const testing::StridedDiff diff =
              testing::compare_strided(got, want, n_tokens, y_stride, rows);
          CHECK(diff.mismatches == 0);
          CHECK(diff.touched == 0);
          CHECK(diff.finite > 0);
        }
      }
    }
  }
}

TEST_CASE("grid i-quant AVX2 dot products are bit-identical to the scalar ones", "[kernels]") {
  if (!have_avx2()) {
    WARN("grid i-quant AVX2 dot products skipped: no AVX2");
    return;
  }
  check_simd_against_scalar("avx2", 51);
}

TEST_CASE("grid i-quant AVX-512 VNNI dot products are bit-identical to the scalar ones",
          "[kernels]") {
  if (!have_avx512_vnni()) {
    WARN("grid i-quant AVX-512 VNNI dot products skipped: no AVX-512 F/BW/VL + VNNI on this CPU");
    return;
  }
  check_simd_against_scalar("avx512-vnni", 52);
}

// Every code byte 0xff or 0x00 (the largest scale codes and the grid entries at the ends of the
// index range) against constant activations of -128, -127 and 127: the SIMD variants equal the
// scalar reference there (the integer sums are at their largest).
TEST_CASE("grid i-quant dot products at the extremes of codes and activations", "[kernels]") {
  if (!have_avx2()) WARN("grid i-quant AVX2 extreme cases skipped: no AVX2 (scalar ones run)");
  if (!have_avx512_vnni()) WARN("grid i-quant AVX-512 VNNI extreme cases skipped: no AVX-512 VNNI");
  constexpr size_t kCols = 512, kRows = 5;
  std::mt19937 rng(9);
  for (const GridType& k : kTypes) {
    for (const uint8_t fill : {uint8_t{0xff}, uint8_t{0x00}, uint8_t{0x5a}}) {
      for (const int xq : {-128, -127, 127}) {
        const size_t row_bytes = kCols / kSuper * k.block_bytes;
        std::vector<uint8_t> w(kRows * row_bytes, fill);
        for (size_t b = 0; b < kRows * kCols / kSuper; ++b) {
          put_d(k, w.data() + b * k.block_bytes, 0x3c00);  // 1.0
        }
        // 2 tokens take the tiles, 6 the many-token passes.
        for (const size_t n_tokens : {size_t{2}, size_t{6}}) {
          QuantizedActivations a =
              testing::random_activations(ActivationFormat::kQ8_K, n_tokens, kCols, rng);
          for (int8_t& q : a.qs) q = static_cast<int8_t>(xq);
          for (float& d : a.d) d = 1.0f;
          for (int16_t& s : a.bsums) s = static_cast<int16_t>(16 * xq);
          std::vector<float> want(n_tokens * kRows);
          k.scalar(w.data(), row_bytes, kRows, view_of(a), want.data(), kRows);
          for (const char* variant : {"avx2", "avx512-vnni"}) {
            const detail::QuantDotFn fn = simd_kernel(k, variant);
            if (fn == nullptr) continue;
            std::vector<float> got(n_tokens * kRows);
            fn(w.data(), row_bytes, kRows, view_of(a), got.data(), kRows);
            INFO(k.name << " " << variant << " fill " << int{fill} << " xq " << xq << " tokens "
                        << n_tokens);
            for (size_t i = 0; i < got.size(); ++i) CHECK(bits_of(got[i]) == bits_of(want[i]));
          }
        }
      }
    }
  }
}

TEST_CASE("grid i-quants have quantized Q8_K rows in the weight-type table", "[kernels]") {
  for (const GridType& k : kTypes) {
    INFO(k.name);
    const WeightTypeKernels* row = weight_type_kernels(k.type);
    REQUIRE(row != nullptr);
    CHECK(row->activations == ActivationFormat::kQ8_K);
    CHECK(row->dot[static_cast<size_t>(MatmulVariant::kScalar)] == k.scalar);
    CHECK(dequantize_supported(k.type));
    CHECK(weight_type_names().find(k.name) != std::string::npos);
#if defined(__x86_64__) || defined(_M_X64)
    for (const MatmulVariant v : {MatmulVariant::kAvx2, MatmulVariant::kAvx512}) {
      CHECK(row->dot[static_cast<size_t>(v)] == k.avx2);
    }
    for (const MatmulVariant v : {MatmulVariant::kAvx512Vnni, MatmulVariant::kAmx}) {
      CHECK(row->dot[static_cast<size_t>(v)] == k.avx512_vnni);
    }
#endif
  }
}

}  // namespace
}  // namespace tandem::kernels
