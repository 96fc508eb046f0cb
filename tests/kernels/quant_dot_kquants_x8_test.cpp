// Tests of the K-quant x8 interleaved layouts (quant_dot.h; Q4_K, Q5_K and Q6_K have one): the
// repack against the layout's byte description, the scalar and every SIMD x8 kernel this CPU runs
// bit-identical to the plain-row scalar reference over many shapes, row ranges and token counts,
// the integer extremes, and matmul_rows on an interleaved WeightMatrix copy.
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

constexpr size_t kSuper = 256;

// One K-quant type with an x8 layout: its plain super-block size, where its fp16 scales sit, and
// its kernels.
struct X8Type {
  size_t block_bytes;
  std::vector<size_t> fp16_offsets;
  testing::X8Kernels k;
};

const X8Type kQ4K{144,
                  {0, 2},
                  {"q4_K",
                   TensorType::kQ4_K,
                   &detail::dot_q4_k_scalar,
                   &detail::repack_q4_k_x8,
                   &detail::dot_q4_k_x8_scalar,
                   {{MatmulVariant::kAvx2, TANDEM_X8_SIMD(dot_q4_k_x8_avx2)},
                    {MatmulVariant::kAvx512Vnni, TANDEM_X8_SIMD(dot_q4_k_x8_avx512_vnni)},
                    {MatmulVariant::kAmx, TANDEM_X8_SIMD(dot_q4_k_x8_amx)}}}};

const X8Type kQ5K{176,
                  {0, 2},
                  {"q5_K",
                   TensorType::kQ5_K,
                   &detail::dot_q5_k_scalar,
                   &detail::repack_q5_k_x8,
                   &detail::dot_q5_k_x8_scalar,
                   {{MatmulVariant::kAvx2, TANDEM_X8_SIMD(dot_q5_k_x8_avx2)},
                    {MatmulVariant::kAvx512Vnni, TANDEM_X8_SIMD(dot_q5_k_x8_avx512_vnni)}}}};

const X8Type kQ6K{210,
                  {208},
                  {"q6_K",
                   TensorType::kQ6_K,
                   &detail::dot_q6_k_scalar,
                   &detail::repack_q6_k_x8,
                   &detail::dot_q6_k_x8_scalar,
                   {{MatmulVariant::kAvx2, TANDEM_X8_SIMD(dot_q6_k_x8_avx2)},
                    {MatmulVariant::kAvx512Vnni, TANDEM_X8_SIMD(dot_q6_k_x8_avx512_vnni)}}}};

// rows x blocks random super-blocks of type k (plain rows, packed), fp16 scales in [0.001, 0.01];
// with `extremes`, every other byte 0xff (Q4_K: quants 15, scales and mins 63).
std::vector<uint8_t> random_blocks(const X8Type& k, size_t rows, size_t blocks, bool extremes,
                                   std::mt19937& rng) {
  std::vector<uint8_t> w(rows * blocks * k.block_bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.001f, 0.01f);
  for (uint8_t& v : w) v = static_cast<uint8_t>(extremes ? 0xff : byte(rng));
  for (size_t i = 0; i < rows * blocks; ++i) {
    uint8_t* blk = w.data() + i * k.block_bytes;
    for (const size_t off : k.fp16_offsets) put_fp16(blk + off, scale(rng));
  }
  return w;
}

// The 6-bit (scale, min) of sub-block j of a plain Q4_K block's 12 packed bytes (the GGUF rule).
int plain_scale(const uint8_t* s, int j) {
  return j < 4 ? s[j] & 63 : (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
}
int plain_min(const uint8_t* s, int j) {
  return j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
}

TEST_CASE("Q4_K x8 repack puts every value where the layout says", "[kernels]") {
  std::mt19937 rng(5);
  for (const size_t rows : {1u, 8u, 13u}) {
    const size_t blocks = 2;
    const std::vector<uint8_t> w = random_blocks(kQ4K, rows, blocks, false, rng);
    const std::vector<uint8_t> g = testing::repacked(kQ4K.k, w, rows, blocks * kQ4K.block_bytes);
    for (size_t r = 0; r < (rows + 7) / 8 * 8; ++r) {
      for (size_t b = 0; b < blocks; ++b) {
        INFO("rows " << rows << " row " << r << " super-block " << b);
        const uint8_t* blk = g.data() + ((r / 8) * blocks + b) * 8 * kQ4K.block_bytes;
        const size_t i = r % 8;
        const bool real = r < rows;
        const uint8_t* src = w.data() + (r * blocks + b) * kQ4K.block_bytes;
        for (size_t k = 0; k < 4; ++k)
          CHECK(blk[2 * i + k % 2 + 16 * (k / 2)] == (real ? src[k] : 0));
        for (int j = 0; j < 8; ++j) {
          const size_t e = 8 * static_cast<size_t>(j) + i;
          const int nib_shift = e < 32 ? 0 : 4;
          const int top_shift = e < 32 ? 0 : 2;
          const uint8_t top = blk[96 + e % 32];
          const int scale =
              ((blk[32 + e % 32] >> nib_shift) & 15) | (((top >> top_shift) & 3) << 4);
          const int min =
              ((blk[64 + e % 32] >> nib_shift) & 15) | (((top >> (top_shift + 4)) & 3) << 4);
          CHECK(scale == (real ? plain_scale(src + 4, j) : 0));
          CHECK(min == (real ? plain_min(src + 4, j) : 0));
        }
        for (size_t l = 0; l < 128; ++l) {
          CHECK(blk[128 + 32 * (l / 4) + 4 * i + l % 4] == (real ? src[16 + l] : 0));
        }
      }
    }
  }
}

TEST_CASE("Q5_K x8 repack puts every value where the layout says", "[kernels]") {
  std::mt19937 rng(7);
  for (const size_t rows : {1u, 8u, 13u}) {
    const size_t blocks = 2;
    const std::vector<uint8_t> w = random_blocks(kQ5K, rows, blocks, false, rng);
    const std::vector<uint8_t> g = testing::repacked(kQ5K.k, w, rows, blocks * kQ5K.block_bytes);
    for (size_t r = 0; r < (rows + 7) / 8 * 8; ++r) {
      for (size_t b = 0; b < blocks; ++b) {
        INFO("rows " << rows << " row " << r << " super-block " << b);
        const uint8_t* blk = g.data() + ((r / 8) * blocks + b) * 8 * kQ5K.block_bytes;
        const size_t i = r % 8;
        const bool real = r < rows;
        const uint8_t* src = w.data() + (r * blocks + b) * kQ5K.block_bytes;
        for (size_t k = 0; k < 4; ++k)
          CHECK(blk[2 * i + k % 2 + 16 * (k / 2)] == (real ? src[k] : 0));
        for (int j = 0; j < 8; ++j) {
          const size_t e = 8 * static_cast<size_t>(j) + i;
          const uint8_t top = blk[96 + e % 32];
          const int scale = ((blk[32 + e % 32] >> (e < 32 ? 0 : 4)) & 15) |
                            (((top >> (e < 32 ? 0 : 2)) & 3) << 4);
          CHECK(scale == (real ? plain_scale(src + 4, j) : 0));
        }
        // Element 64c + 32s + 4m + jj: quant nibble s of byte 128 + 320c + 32m + 4i + jj, fifth
        // bit m % 4 + 4s of byte 128 + 320c + 256 + 32(m / 4) + 4i + jj; plain: nibble s of
        // qs[32c + 4m + jj] (qs at 48), bit 2c + s of qh[4m + jj] (qh at 16).
        for (size_t c = 0; c < 4; ++c) {
          for (size_t m = 0; m < 8; ++m) {
            for (size_t jj = 0; jj < 4; ++jj) {
              const size_t l = 4 * m + jj;
              const uint8_t q = blk[128 + 320 * c + 32 * m + 4 * i + jj];
              const uint8_t h = blk[128 + 320 * c + 256 + 32 * (m / 4) + 4 * i + jj];
              CHECK(q == (real ? src[48 + 32 * c + l] : 0));
              for (size_t half = 0; half < 2; ++half) {
                const int got = (h >> (m % 4 + 4 * half)) & 1;
                const int want = real ? (src[16 + l] >> (2 * c + half)) & 1 : 0;
                CHECK(got == want);
              }
            }
          }
        }
      }
    }
  }
}

// The 6-bit quant of element e of a plain Q6_K super-block (the GGUF rule).
int plain_q6_k(const uint8_t* blk, size_t e) {
  const size_t h = e / 128, s = e / 32 % 4, l = e % 32;
  return ((blk[64 * h + 32 * (s % 2) + l] >> (4 * (s / 2))) & 15) |
         (((blk[128 + 32 * h + l] >> (2 * s)) & 3) << 4);
}

TEST_CASE("Q6_K x8 repack puts every value where the layout says", "[kernels]") {
  std::mt19937 rng(6);
  for (const size_t rows : {1u, 8u, 13u}) {
    const size_t blocks = 2;
    const std::vector<uint8_t> w = random_blocks(kQ6K, rows, blocks, false, rng);
    const std::vector<uint8_t> g = testing::repacked(kQ6K.k, w, rows, blocks * kQ6K.block_bytes);
    for (size_t r = 0; r < (rows + 7) / 8 * 8; ++r) {
      for (size_t b = 0; b < blocks; ++b) {
        INFO("rows " << rows << " row " << r << " super-block " << b);
        const uint8_t* blk = g.data() + ((r / 8) * blocks + b) * 8 * kQ6K.block_bytes;
        const size_t i = r % 8;
        const bool real = r < rows;
        const uint8_t* src = w.data() + (r * blocks + b) * kQ6K.block_bytes;
        CHECK(blk[2 * i] == (real ? src[208] : 0));
        CHECK(blk[2 * i + 1] == (real ? src[209] : 0));
        for (size_t j = 0; j < 16; ++j) CHECK(blk[16 + 8 * j + i] == (real ? src[192 + j] : 0));
        for (size_t c = 0; c < 4; ++c) {
          for (size_t m = 0; m < 8; ++m) {
            for (size_t j = 0; j < 4; ++j) {
              const uint8_t low = blk[144 + 384 * c + 32 * m + 4 * i + j];
              const uint8_t top = blk[400 + 384 * c + 32 * (m / 2) + 4 * i + j];
              const int shift = 4 * static_cast<int>(m % 2);
              const int q_lo = (low & 15) | (((top >> shift) & 3) << 4);
              const int q_hi = (low >> 4) | (((top >> (shift + 2)) & 3) << 4);
              CHECK(q_lo == (real ? plain_q6_k(src, 64 * c + 4 * m + j) : 0));
              CHECK(q_hi == (real ? plain_q6_k(src, 64 * c + 32 + 4 * m + j) : 0));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("K-quant x8 dot products are bit-identical to the plain scalar references", "[kernels]") {
  const size_t kRows[] = {8, 16, 1, 7, 9, 24, 33, 64, 15, 40};
  for (const X8Type* k : {&kQ4K, &kQ5K, &kQ6K}) {
    const std::vector<testing::NamedX8Kernel> kernels = testing::x8_kernels(k->k);
    std::mt19937 rng(41);
    for (size_t c = 0; c < 40; ++c) {
      const size_t blocks = 1 + c % 8;
      const size_t rows = kRows[c % std::size(kRows)];
      const size_t n_tokens = 1 + (c * 7) % 13;
      const std::vector<uint8_t> w = random_blocks(*k, rows, blocks, false, rng);
      const QuantizedActivations a =
          testing::random_activations(ActivationFormat::kQ8_K, n_tokens, blocks * kSuper, rng);
      testing::check_x8_kernels(k->k, kernels, w, rows, blocks * k->block_bytes, 0, rows,
                                view_of(a));
      // A range that starts and ends inside groups.
      if (rows > 2)
        testing::check_x8_kernels(k->k, kernels, w, rows, blocks * k->block_bytes, 1, rows - 1,
                                  view_of(a));
    }
  }
}

// Prefill-sized calls (the AMX kernel's tiles: 16 tokens x 16 rows, a partial last tile of
// tokens, chunks of 128 tokens, rows outside whole pairs of groups; the AVX-512 tokens-in-lanes
// kernel's registers of 16 tokens, a padded last register (31, 40, 75 tokens) or leftover tokens
// on the 256-bit tiles (17, 37, 130), passes of four registers and a last odd register).
TEST_CASE("K-quant x8 dot products over many tokens are bit-identical", "[kernels]") {
  for (const X8Type* k : {&kQ4K, &kQ5K, &kQ6K}) {
    const std::vector<testing::NamedX8Kernel> kernels = testing::x8_kernels(k->k);
    std::mt19937 rng(53);
    const struct {
      size_t rows, blocks, n_tokens, row_begin, row_end;
    } kCases[] = {{32, 2, 16, 0, 32},  {48, 1, 17, 0, 48}, {40, 3, 4, 8, 40},   {64, 2, 37, 3, 61},
                  {24, 1, 130, 0, 24}, {16, 2, 5, 0, 16},  {56, 1, 64, 16, 40}, {32, 8, 31, 0, 32},
                  {40, 2, 75, 5, 37},  {16, 1, 40, 0, 16}};
    for (const auto& c : kCases) {
      const std::vector<uint8_t> w = random_blocks(*k, c.rows, c.blocks, false, rng);
      const QuantizedActivations a =
          testing::random_activations(ActivationFormat::kQ8_K, c.n_tokens, c.blocks * kSuper, rng);
      testing::check_x8_kernels(k->k, kernels, w, c.rows, c.blocks * k->block_bytes, c.row_begin,
                                c.row_end, view_of(a));
    }
  }
}

TEST_CASE("K-quant x8 dot products at the integer extremes", "[kernels]") {
  for (const X8Type* k : {&kQ4K, &kQ5K, &kQ6K}) {
    const std::vector<testing::NamedX8Kernel> kernels = testing::x8_kernels(k->k);
    std::mt19937 rng(43);
    for (const float v : {1.0f, -1.0f}) {
      const size_t rows = 24;
      const size_t blocks = 8;
      const std::vector<uint8_t> w = random_blocks(*k, rows, blocks, true, rng);
      // Constant activations quantize to +-127 (or -128) in every element.
      const std::vector<float> x(20 * blocks * kSuper, v);
      const QuantizedActivations a =
          testing::quantize(ActivationFormat::kQ8_K, x, 20, blocks * kSuper);
      testing::check_x8_kernels(k->k, kernels, w, rows, blocks * k->block_bytes, 0, rows,
                                view_of(a));
    }
  }
}

TEST_CASE("matmul_rows on interleaved K-quant matrices matches the plain rows", "[kernels]") {
  for (const X8Type* k : {&kQ4K, &kQ5K, &kQ6K}) {
    INFO(k->k.name);
    std::mt19937 rng(47);
    const size_t rows = 40;
    const size_t blocks = 3;
    const std::vector<uint8_t> w = random_blocks(*k, rows, blocks, false, rng);
    auto plain = make_weight_matrix(k->k.type, w, rows, blocks * kSuper);
    REQUIRE(plain.ok());
    std::vector<uint8_t> buffer(interleaved_bytes(*plain));
    const WeightMatrix inter = interleave_rows8(*plain, buffer, WeightLayout::kInterleaved8);
    // The rows with their interleaved copy attached (WeightMatrix::interleaved): the copy is read
    // where the variant has an interleaved kernel; every result the same bits.
    WeightMatrix both = *plain;
    both.interleaved = inter.data;
    both.interleaved_layout = WeightLayout::kInterleaved8;
    for (const size_t n_tokens : {size_t{1}, size_t{2}, size_t{6}}) {
      INFO(n_tokens << " tokens");
      const QuantizedActivations a =
          testing::random_activations(ActivationFormat::kQ8_K, n_tokens, blocks * kSuper, rng);
      std::vector<float> want(n_tokens * 24, NAN);
      std::vector<float> got(n_tokens * 24, NAN);
      std::vector<float> got_both(n_tokens * 24, NAN);
      matmul_rows(*plain, view_of(a), want.data(), 24, 12, 36);
      matmul_rows(inter, view_of(a), got.data(), 24, 12, 36);
      matmul_rows(both, view_of(a), got_both.data(), 24, 12, 36);
      size_t mismatches = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        mismatches += bits_of(got[i]) != bits_of(want[i]);
        mismatches += bits_of(got_both[i]) != bits_of(want[i]);
      }
      CHECK(mismatches == 0);
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
