// Tests of the x8 block interleave of Q8_0, Q4_0, Q5_0 and IQ4_NL and of Q8_0's row-quad interleave
// (quant_dot.h): the repacks against the layouts' descriptions, the scalar and every SIMD x8 kernel
// this CPU runs bit-identical to the plain-row scalar reference over many shapes, row ranges
// (starting and ending inside groups) and token counts, the integer extremes, and matmul_rows on an
// interleaved WeightMatrix.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_dispatch.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/weight_matrix.h"
#include "kernels/cpu/weight_type_table.h"
#include "tests/kernels/quant_dot_test_support.h"
#include "tests/kernels/x8_test_support.h"

namespace tandem::kernels {
namespace {

using testing::bits_of;
using testing::put_fp16;

constexpr size_t kBlock = 32;

// One type with one of these interleaves: its block size, the layout and its kernels.
struct BlockX8Type {
  size_t block_bytes;
  WeightLayout layout;
  testing::X8Kernels k;
};

const BlockX8Type kTypes[] = {
    {34,
     WeightLayout::kRowQuads8,
     {"q8_0 row quads",
      TensorType::kQ8_0,
      &detail::dot_q8_0_scalar,
      &detail::repack_q8_0_quads,
      &detail::dot_q8_0_quads_scalar,
      {{MatmulVariant::kAvx2, TANDEM_X8_SIMD(dot_q8_0_quads_avx2)},
       {MatmulVariant::kAvx512Vnni, TANDEM_X8_SIMD(dot_q8_0_quads_avx512_vnni)}}}},
    {34,
     WeightLayout::kInterleaved8,
     {"q8_0",
      TensorType::kQ8_0,
      &detail::dot_q8_0_scalar,
      &detail::repack_q8_0_x8,
      &detail::dot_q8_0_x8_scalar,
      {{MatmulVariant::kAvx2, TANDEM_X8_SIMD(dot_q8_0_x8_avx2)},
       {MatmulVariant::kAvx512Vnni, TANDEM_X8_SIMD(dot_q8_0_x8_avx512_vnni)}}}},
    {18,
     WeightLayout::kInterleaved8,
     {"q4_0",
      TensorType::kQ4_0,
      &detail::dot_q4_0_scalar,
      &detail::repack_q4_0_x8,
      &detail::dot_q4_0_x8_scalar,
      {{MatmulVariant::kAvx2, TANDEM_X8_SIMD(dot_q4_0_x8_avx2)}}}},
    {22,
     WeightLayout::kInterleaved8,
     {"q5_0",
      TensorType::kQ5_0,
      &detail::dot_q5_0_scalar,
      &detail::repack_q5_0_x8,
      &detail::dot_q5_0_x8_scalar,
      {{MatmulVariant::kAvx2, TANDEM_X8_SIMD(dot_q5_0_x8_avx2)}}}},
    {18,
     WeightLayout::kInterleaved8,
     {"iq4_nl",
      TensorType::kIQ4_NL,
      &detail::dot_iq4_nl_scalar,
      &detail::repack_iq4_nl_x8,
      &detail::dot_iq4_nl_x8_scalar,
      {{MatmulVariant::kAvx2, TANDEM_X8_SIMD(dot_iq4_nl_x8_avx2)}}}},
};

// rows x blocks random blocks of type k (plain rows, packed), the fp16 scale (bytes 0-1) in
// [0.001, 0.01]; with `extremes`, every quant byte 0x80 (Q8_0: q = -128) or 0xff.
std::vector<uint8_t> random_blocks(const BlockX8Type& k, size_t rows, size_t blocks,
                                   uint8_t extreme, std::mt19937& rng) {
  std::vector<uint8_t> w(rows * blocks * k.block_bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.001f, 0.01f);
  for (uint8_t& v : w) v = static_cast<uint8_t>(extreme != 0 ? extreme : byte(rng));
  for (size_t i = 0; i < rows * blocks; ++i) put_fp16(w.data() + i * k.block_bytes, scale(rng));
  return w;
}

// The x8 kernels of k checked on rows [row_begin, row_end) of `rows` plain rows w.
void check_kernels(const BlockX8Type& k, const std::vector<uint8_t>& w, size_t rows, size_t blocks,
                   size_t row_begin, size_t row_end, const ActivationRows& x) {
  testing::check_x8_kernels(k.k, testing::x8_kernels(k.k), w, rows, blocks * k.block_bytes,
                            row_begin, row_end, x);
}

TEST_CASE("Q8_0/Q4_0/Q5_0/IQ4_NL x8 and Q8_0 row-quad repacks put every byte where the layout says",
          "[kernels]") {
  std::mt19937 rng(7);
  for (const BlockX8Type& k : kTypes) {
    for (const size_t rows : {1u, 8u, 13u}) {
      const size_t blocks = 3;
      const std::vector<uint8_t> w = random_blocks(k, rows, blocks, 0, rng);
      const std::vector<uint8_t> g = testing::repacked(k.k, w, rows, blocks * k.block_bytes);
      const size_t row_bytes = blocks * k.block_bytes;
      size_t wrong = 0;
      for (size_t r = 0; r < (rows + 7) / 8 * 8; ++r) {
        for (size_t b = 0; b < blocks; ++b) {
          const uint8_t* column = g.data() + r / 8 * 8 * row_bytes + b * 8 * k.block_bytes;
          for (size_t j = 0; j < k.block_bytes; ++j) {
            // x8: the plain block at row r % 8; row quads: the scale at 2i, quant byte j - 2 (quad
            // (j - 2) / 4) at 16 + 32 * quad + 4i + (j - 2) % 4.
            const size_t i = r % 8;
            const size_t at = k.layout == WeightLayout::kInterleaved8 ? i * k.block_bytes + j
                              : j < 2                                 ? 2 * i + j
                                      : 16 + 32 * ((j - 2) / 4) + 4 * i + (j - 2) % 4;
            const uint8_t want = r < rows ? w[r * row_bytes + b * k.block_bytes + j] : 0;
            wrong += column[at] != want ? 1 : 0;
          }
        }
      }
      INFO(k.k.name << ", rows " << rows);
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE(
    "Q8_0/Q4_0/Q5_0/IQ4_NL x8 and Q8_0 row-quad dot products are bit-identical to the plain "
    "references",
    "[kernels]") {
  const size_t kRows[] = {8, 16, 1, 7, 9, 24, 33, 64, 15, 40};
  for (const BlockX8Type& k : kTypes) {
    std::mt19937 rng(31);
    for (size_t c = 0; c < 30; ++c) {
      const size_t blocks = 1 + c % 9;
      const size_t rows = kRows[c % std::size(kRows)];
      const size_t n_tokens = 1 + (c * 7) % 19;
      const std::vector<uint8_t> w = random_blocks(k, rows, blocks, 0, rng);
      const QuantizedActivations a =
          testing::random_activations(ActivationFormat::kQ8_0, n_tokens, blocks * kBlock, rng);
      check_kernels(k, w, rows, blocks, 0, rows, view_of(a));
      // Ranges that start and end inside groups (and inside the VNNI kernel's 16-row tiles).
      if (rows > 2) check_kernels(k, w, rows, blocks, 1, rows - 1, view_of(a));
      if (rows > 12) check_kernels(k, w, rows, blocks, 11, rows, view_of(a));
    }
    // Calls of many tokens, as a prefill's: many whole tiles of 4 tokens and a partial last one.
    for (const size_t n_tokens : {size_t{32}, size_t{37}, size_t{70}}) {
      const size_t rows = n_tokens == 37 ? 17 : 40;
      const size_t blocks = n_tokens == 70 ? 3 : 9;
      INFO(n_tokens << " tokens, " << rows << " rows, " << blocks << " blocks");
      const std::vector<uint8_t> w = random_blocks(k, rows, blocks, 0, rng);
      const QuantizedActivations a =
          testing::random_activations(ActivationFormat::kQ8_0, n_tokens, blocks * kBlock, rng);
      check_kernels(k, w, rows, blocks, 0, rows, view_of(a));
      check_kernels(k, w, rows, blocks, 1, rows - 1, view_of(a));
      check_kernels(k, w, rows, blocks, 11, rows, view_of(a));
    }
  }
}

TEST_CASE("Q8_0/Q4_0/Q5_0/IQ4_NL x8 and Q8_0 row-quad dot products at the integer extremes",
          "[kernels]") {
  for (const BlockX8Type& k : kTypes) {
    std::mt19937 rng(37);
    for (const uint8_t extreme : {uint8_t{0x80}, uint8_t{0xff}}) {
      for (const float v : {1.0f, -1.0f}) {
        const size_t rows = 24;
        const size_t blocks = 8;
        const std::vector<uint8_t> w = random_blocks(k, rows, blocks, extreme, rng);
        // Constant activations quantize to +-127 in every element.
        const std::vector<float> x(9 * blocks * kBlock, v);
        const QuantizedActivations a =
            testing::quantize(ActivationFormat::kQ8_0, x, 9, blocks * kBlock);
        check_kernels(k, w, rows, blocks, 0, rows, view_of(a));
      }
    }
  }
}

TEST_CASE("matmul_rows on x8 and row-quad Q8_0/Q4_0/Q5_0/IQ4_NL matrices matches the plain rows",
          "[kernels]") {
  for (const BlockX8Type& k : kTypes) {
    INFO(k.k.name);
    std::mt19937 rng(43);
    const size_t rows = 45;
    const size_t blocks = 5;
    const std::vector<uint8_t> w = random_blocks(k, rows, blocks, 0, rng);
    auto plain = make_weight_matrix(k.k.type, w, rows, blocks * kBlock);
    REQUIRE(plain.ok());
    std::vector<uint8_t> buffer(interleaved_bytes(*plain));
    const WeightMatrix inter = interleave_rows8(*plain, buffer, k.layout);
    CHECK(inter.layout == k.layout);
    WeightMatrix both = *plain;
    both.interleaved = inter.data;
    both.interleaved_layout = k.layout;
    const MatmulVariant saved = active_matmul_variant();
    for (MatmulVariant v : kMatmulVariants) {
      if (!matmul_variant_supported(v)) continue;
      set_matmul_variant(v);
      INFO(matmul_variant_name(v));
      for (const size_t n_tokens : {size_t{1}, size_t{3}, size_t{9}}) {
        INFO(n_tokens << " tokens");
        const QuantizedActivations a =
            testing::random_activations(ActivationFormat::kQ8_0, n_tokens, blocks * kBlock, rng);
        std::vector<float> want(n_tokens * 30, NAN);
        std::vector<float> got(n_tokens * 30, NAN);
        std::vector<float> got_both(n_tokens * 30, NAN);
        matmul_rows(*plain, view_of(a), want.data(), 30, 13, 43);
        matmul_rows(inter, view_of(a), got.data(), 30, 13, 43);
        matmul_rows(both, view_of(a), got_both.data(), 30, 13, 43);
        size_t mismatches = 0;
        for (size_t i = 0; i < want.size(); ++i) {
          mismatches += bits_of(got[i]) != bits_of(want[i]);
          mismatches += bits_of(got_both[i]) != bits_of(want[i]);
        }
        CHECK(mismatches == 0);
      }
    }
    set_matmul_variant(saved);
  }
}

TEST_CASE("preferred_weight_layout: Q8_0 row quads on AVX2 and AVX-512 VNNI, x8 on AMX",
          "[kernels]") {
  const MatmulVariant saved = active_matmul_variant();
  size_t checked = 0;
  for (MatmulVariant v : kMatmulVariants) {
    if (!matmul_variant_supported(v)) continue;
    set_matmul_variant(v);
    INFO(matmul_variant_name(v));
    const WeightLayout q8_0 = preferred_weight_layout(TensorType::kQ8_0);
    const WeightLayout q4_0 = preferred_weight_layout(TensorType::kQ4_0);
    if (v == MatmulVariant::kScalar) {
      CHECK(q8_0 == WeightLayout::kRows);
      CHECK(q4_0 == WeightLayout::kRows);
    } else if (v == MatmulVariant::kAvx2) {
      CHECK(q8_0 == WeightLayout::kRowQuads8);
      CHECK(q4_0 == WeightLayout::kInterleaved8);
    } else if (v == MatmulVariant::kAvx512Vnni) {
      CHECK(q8_0 == WeightLayout::kRowQuads8);
      CHECK(q4_0 == WeightLayout::kRows);
    } else if (v == MatmulVariant::kAvx512 || v == MatmulVariant::kAmx) {
      CHECK(q8_0 == WeightLayout::kInterleaved8);
      CHECK(q4_0 ==
            (v == MatmulVariant::kAvx512 ? WeightLayout::kInterleaved8 : WeightLayout::kRows));
    }
    CHECK(interleaved_layout_preferred(TensorType::kQ8_0) == (q8_0 != WeightLayout::kRows));
    CHECK(preferred_weight_layout(TensorType::kF16) == WeightLayout::kRows);
    ++checked;
  }
  set_matmul_variant(saved);
  CHECK(checked >= 1);
}

}  // namespace
}  // namespace tandem::kernels
