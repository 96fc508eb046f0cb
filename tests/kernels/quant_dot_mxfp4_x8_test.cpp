// Tests of the MXFP4 x8 interleaved layout (quant_dot.h): the repack's byte positions, the scalar
// and AVX2 x8 kernels bit-identical to the plain-row scalar reference dot_mxfp4_scalar over many
// shapes, row ranges, token counts and exponents (0, 1, 2, 254, 255 included), the int16 extremes,
// and matmul_rows on an interleaved WeightMatrix.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_dispatch.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/weight_matrix.h"
#include "kernels/cpu/weight_type_table.h"
#include "tests/kernels/quant_dot_test_support.h"

namespace tandem::kernels {
namespace {

using testing::bits_of;
using testing::have_avx2;

constexpr size_t kBlock = 32;
constexpr size_t kMxfp4Bytes = 17;

// rows x blocks random MXFP4 blocks (plain rows, packed). Exponents: mostly 118..130; with
// `extremes`, now and then 0, 1 or 2 (subnormal and the smallest normal scales) and, in every third
// row (rows 2, 5, ...; the others stay finite), 254 or 255 (products that overflow).
std::vector<uint8_t> random_mxfp4(size_t rows, size_t blocks, bool extremes, std::mt19937& rng) {
  std::vector<uint8_t> w(rows * blocks * kMxfp4Bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> exponent(118, 130);
  std::uniform_int_distribution<int> percent(0, 999);
  for (uint8_t& v : w) v = static_cast<uint8_t>(byte(rng));
  for (size_t i = 0; i < rows * blocks; ++i) {
    int e = exponent(rng);
    if (extremes) {
      const int p = percent(rng);
      if (p < 20) e = 0;
      if (p >= 20 && p < 40) e = 1;
      if (p >= 40 && p < 60) e = 2;
      if (i / blocks % 3 == 2 && p >= 60 && p < 80) e = 254;
      if (i / blocks % 3 == 2 && p >= 80 && p < 100) e = 255;
    }
    w[i * kMxfp4Bytes] = static_cast<uint8_t>(e);
  }
  return w;
}

std::vector<uint8_t> repacked(const std::vector<uint8_t>& w, size_t rows, size_t blocks) {
  std::vector<uint8_t> groups((rows + 7) / 8 * 8 * blocks * kMxfp4Bytes, 0xa5);
  detail::repack_mxfp4_x8(w.data(), blocks * kMxfp4Bytes, rows, groups.data());
  return groups;
}

// Counts the differing bit patterns between want and got over the written elements (token t,
// column c < n of a y_stride row), and the elements outside them that either run touched (both
// are pre-filled with NaN).
struct Comparison {
  size_t mismatches = 0;
  size_t touched = 0;
  size_t finite = 0;
};

Comparison compare(const std::vector<float>& want, const std::vector<float>& got, size_t n_tokens,
                   size_t y_stride, size_t n) {
  Comparison c;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool written = i < n_tokens * y_stride && i % y_stride < n;
    if (written) {
      if (bits_of(got[i]) != bits_of(want[i])) ++c.mismatches;
      if (std::isfinite(want[i])) ++c.finite;
    } else if (!std::isnan(got[i]) || !std::isnan(want[i])) {
      ++c.touched;
    }
  }
  return c;
}

TEST_CASE("MXFP4 x8 repack puts every byte where the layout says", "[kernels]") {
  std::mt19937 rng(3);
  for (const size_t rows : {1u, 8u, 13u}) {
    const size_t blocks = 3;
    const std::vector<uint8_t> w = random_mxfp4(rows, blocks, false, rng);
    const std::vector<uint8_t> g = repacked(w, rows, blocks);
    const size_t groups = (rows + 7) / 8;
    REQUIRE(g.size() == groups * 8 * blocks * kMxfp4Bytes);
    for (size_t r = 0; r < groups * 8; ++r) {
      for (size_t b = 0; b < blocks; ++b) {
        const uint8_t* block = g.data() + ((r / 8) * blocks + b) * 136;
        const size_t i = r % 8;
        const uint8_t* src = w.data() + (r * blocks + b) * kMxfp4Bytes;
        INFO("rows " << rows << " row " << r << " block " << b);
        // Rows past the end are zero: exponent 0 and codes 0.
        CHECK(block[i] == (r < rows ? src[0] : 0));
        for (size_t k = 0; k < 4; ++k) {
          for (size_t j = 0; j < 4; ++j) {
            CHECK(block[8 + 32 * k + 4 * i + j] == (r < rows ? src[1 + 4 * k + j] : 0));
          }
        }
      }
    }
  }
}

TEST_CASE("MXFP4 x8 dot products are bit-identical to the plain scalar reference", "[kernels]") {
  const bool avx2 = have_avx2();
  if (!avx2) WARN("MXFP4 x8 AVX2 dot products skipped: no AVX2 (the scalar x8 kernel runs)");
  const bool amx = matmul_variant_supported(MatmulVariant::kAmx);
  if (!amx) WARN("MXFP4 x8 AMX dot products skipped: this CPU cannot run them");
  std::mt19937 rng(29);
  const size_t kRows[] = {8, 16, 1, 7, 9, 24, 33, 64, 15, 40};
  size_t cases = 0;
  for (size_t blocks = 1; blocks <= 100; ++blocks) {
    const size_t rows = kRows[blocks % std::size(kRows)];
    const size_t n_tokens = 1 + (blocks * 7) % 20;
    const size_t cols = blocks * kBlock;
    const size_t row_bytes = blocks * kMxfp4Bytes;
    const std::vector<uint8_t> w = random_mxfp4(rows, blocks, true, rng);
    const std::vector<uint8_t> g = repacked(w, rows, blocks);
    const QuantizedActivations a =
        testing::random_activations(ActivationFormat::kQ8_0, n_tokens, cols, rng);
    const ActivationRows x = view_of(a);
    // The whole matrix, then a range starting inside a group where the matrix has one.
    std::vector<std::pair<size_t, size_t>> ranges = {{0, rows}};
    if (rows > 9) ranges.push_back({3, rows - 1});
    if (rows > 16) ranges.push_back({8, 16});
    for (const auto& [r0, r1] : ranges) {
      ++cases;
      const size_t y_stride = r1 - r0 + cases % 3;
      const size_t size = n_tokens * y_stride + 3;
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> want(size, nan), scalar(size, nan), simd(size, nan);
      detail::dot_mxfp4_scalar(w.data() + r0 * row_bytes, row_bytes, r1 - r0, x, want.data(),
                               y_stride);
      detail::dot_mxfp4_x8_scalar(g.data(), r0, r1, x, scalar.data(), y_stride);
      INFO("blocks " << blocks << " rows " << rows << " range " << r0 << ".." << r1 << " tokens "
                     << n_tokens << " y_stride " << y_stride);
      const Comparison cs = compare(want, scalar, n_tokens, y_stride, r1 - r0);
      CHECK(cs.mismatches == 0);
      CHECK(cs.touched == 0);
      CHECK(cs.finite > 0);
#if defined(__x86_64__) || defined(_M_X64)
      if (!avx2) continue;
      detail::dot_mxfp4_x8_avx2(g.data(), r0, r1, x, simd.data(), y_stride);
      const Comparison c = compare(want, simd, n_tokens, y_stride, r1 - r0);
      CHECK(c.mismatches == 0);
      CHECK(c.touched == 0);
      if (!matmul_variant_supported(MatmulVariant::kAvx512Vnni)) continue;
      std::vector<float> vnni(size, nan);
      detail::dot_mxfp4_x8_avx512_vnni(g.data(), r0, r1, x, vnni.data(), y_stride);
      const Comparison cv = compare(want, vnni, n_tokens, y_stride, r1 - r0);
      CHECK(cv.mismatches == 0);
      CHECK(cv.touched == 0);
      if (!amx) continue;
      std::vector<float> tiles(size, nan);
      detail::dot_mxfp4_x8_amx(g.data(), r0, r1, x, tiles.data(), y_stride);
      const Comparison ca = compare(want, tiles, n_tokens, y_stride, r1 - r0);
      CHECK(ca.mismatches == 0);
      CHECK(ca.touched == 0);
#endif
    }
  }
}

TEST_CASE("MXFP4 x8 dot products at the extremes of the quants and exponents", "[kernels]") {
  const bool avx2 = have_avx2();
  if (!avx2) WARN("MXFP4 x8 AVX2 dot products skipped: no AVX2 (the scalar x8 kernel runs)");
  constexpr size_t kBlocks = 5, kCols = kBlocks * kBlock, kRows = 17;
  // Codes 7 (+12, the largest biased value 24) and 15 (-12, biased 0) in every element, exponents
  // per block 0, 1, 2, 254, 255, against activation rows of all -128, all +127 and alternating.
  constexpr uint8_t kExponents[kBlocks] = {0, 1, 2, 254, 255};
  // The three rows repeated to 18 tokens (so that the AMX kernel's tiles take them) and 17 weight
  // rows (a whole pair of groups and one more row).
  const size_t n_tokens = 18;
  std::vector<int8_t> qs(n_tokens * kCols);
  for (size_t t = 0; t < n_tokens; ++t) {
    for (size_t i = 0; i < kCols; ++i) {
      qs[t * kCols + i] = t % 3 == 0 ? -128 : t % 3 == 1 ? 127 : (i % 2 == 0 ? -128 : 127);
    }
  }
  std::vector<float> d(n_tokens * kBlocks, 1.0f);
  d[kBlocks + 1] = 0.5f;
  d[2 * kBlocks + 3] = std::ldexp(1.0f, -20);
  ActivationRows x;
  x.format = ActivationFormat::kQ8_0;
  x.n_tokens = n_tokens;
  x.cols = kCols;
  x.qs = qs.data();
  x.d = d.data();
  for (const int code : {7, 15, 1, 9}) {
    std::vector<uint8_t> w(kRows * kBlocks * kMxfp4Bytes);
    for (size_t r = 0; r < kRows; ++r) {
      for (size_t b = 0; b < kBlocks; ++b) {
        uint8_t* block = w.data() + (r * kBlocks + b) * kMxfp4Bytes;
        block[0] = kExponents[(b + r) % kBlocks];
        for (size_t j = 0; j < 16; ++j) block[1 + j] = static_cast<uint8_t>(code | code << 4);
      }
    }
    const std::vector<uint8_t> g = repacked(w, kRows, kBlocks);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> want(n_tokens * kRows, nan), got(n_tokens * kRows, nan);
    detail::dot_mxfp4_scalar(w.data(), kBlocks * kMxfp4Bytes, kRows, x, want.data(), kRows);
    INFO("code " << code);
    detail::dot_mxfp4_x8_scalar(g.data(), 0, kRows, x, got.data(), kRows);
    for (size_t i = 0; i < want.size(); ++i) CHECK(bits_of(got[i]) == bits_of(want[i]));
#if defined(__x86_64__) || defined(_M_X64)
    if (!avx2) continue;
    std::vector<float> simd(n_tokens * kRows, nan);
    detail::dot_mxfp4_x8_avx2(g.data(), 0, kRows, x, simd.data(), kRows);
    for (size_t i = 0; i < want.size(); ++i) CHECK(bits_of(simd[i]) == bits_of(want[i]));
    if (!matmul_variant_supported(MatmulVariant::kAvx512Vnni)) continue;
    std::vector<float> vnni(n_tokens * kRows, nan);
    detail::dot_mxfp4_x8_avx512_vnni(g.data(), 0, kRows, x, vnni.data(), kRows);
    for (size_t i = 0; i < want.size(); ++i) CHECK(bits_of(vnni[i]) == bits_of(want[i]));
    if (!matmul_variant_supported(MatmulVariant::kAmx)) continue;
    std::vector<float> tiles(n_tokens * kRows, nan);
    detail::dot_mxfp4_x8_amx(g.data(), 0, kRows, x, tiles.data(), kRows);
    for (size_t i = 0; i < want.size(); ++i) CHECK(bits_of(tiles[i]) == bits_of(want[i]));
#endif
  }
}

TEST_CASE("matmul_rows on an interleaved MXFP4 matrix equals the plain rows in every variant",
          "[kernels]") {
  std::mt19937 rng(41);
  constexpr size_t kRows = 45, kBlocks = 9, kCols = kBlocks * kBlock, kTokens = 6;
  const std::vector<uint8_t> bytes = random_mxfp4(kRows, kBlocks, false, rng);
  Result<WeightMatrix> plain = make_weight_matrix(TensorType::kMXFP4, bytes, kRows, kCols);
  REQUIRE(plain.ok());
  const WeightTypeKernels* row = weight_type_kernels(TensorType::kMXFP4);
  REQUIRE(row != nullptr);
  REQUIRE(row->interleaved_x8.repack != nullptr);
  std::vector<uint8_t> buffer(interleaved_bytes(*plain));
  const WeightMatrix inter = interleave_rows8(*plain, buffer, WeightLayout::kInterleaved8);
  CHECK(inter.layout == WeightLayout::kInterleaved8);
  CHECK(inter.rows == kRows);
  CHECK(inter.cols == kCols);
  CHECK(inter.type == TensorType::kMXFP4);
  const QuantizedActivations a =
      testing::random_activations(ActivationFormat::kQ8_0, kTokens, kCols, rng);
  const MatmulVariant saved = active_matmul_variant();
  for (MatmulVariant v : kMatmulVariants) {
    if (!matmul_variant_supported(v)) continue;
    set_matmul_variant(v);
    INFO(matmul_variant_name(v));
    CHECK(interleaved_layout_preferred(TensorType::kMXFP4) == (v != MatmulVariant::kScalar));
    CHECK_FALSE(interleaved_layout_preferred(TensorType::kQ2_K));  // plain rows only
    // The whole matrix and ranges that start and end inside groups.
    for (const auto& [r0, r1] : {std::pair<size_t, size_t>{0, kRows}, {5, 37}, {16, 45}, {9, 10}}) {
      INFO("rows " << r0 << ".." << r1);
      const size_t n = r1 - r0;
      std::vector<float> want(kTokens * n), got(kTokens * n);
      matmul_rows(*plain, view_of(a), want.data(), n, r0, r1);
      matmul_rows(inter, view_of(a), got.data(), n, r0, r1);
      size_t mismatches = 0;
      for (size_t i = 0; i < want.size(); ++i) mismatches += bits_of(got[i]) != bits_of(want[i]);
      CHECK(mismatches == 0);
    }
  }
  set_matmul_variant(saved);
}

}  // namespace
}  // namespace tandem::kernels
