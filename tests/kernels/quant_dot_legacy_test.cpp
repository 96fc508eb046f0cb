// Tests of the 32-element-block dot products (Q8_0, Q4_0, Q5_0, MXFP4 weights x Q8_0 activations,
// quant_dot.h) and of dequantize_mxfp4: the scalar references against dequantized values in
// double, the AVX2 and AVX-512 VNNI variants bit-identical to them, and extreme inputs.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string_view>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/dequantize_rows.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/tensor_type.h"
#include "tests/kernels/quant_dot_test_support.h"

namespace tandem::kernels {
namespace {

using testing::bits_of;
using testing::have_avx2;
using testing::put_fp16;
using testing::run_strided;

constexpr size_t kBlock = 32;
constexpr double kUnit = 1.0 / 16777216.0;  // 2^-24, the float unit roundoff

// The E2M1 code points doubled, as the MXFP4 format defines them.
constexpr int kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

enum class Kind { kQ8_0, kQ4_0, kQ5_0, kMxfp4 };

// One weight type: its block, its kernels (avx2 / avx512_vnni null where this build has no x86
// kernels or the variant is not under test here).
struct LegacyType {
  const char* name;
  Kind kind;
  size_t block_bytes;
  detail::QuantDotFn scalar;
  detail::QuantDotFn avx2;
  detail::QuantDotFn avx512_vnni;
};

#if defined(__x86_64__) || defined(_M_X64)
#define TANDEM_LEGACY_AVX2(fn) &detail::fn
#else
#define TANDEM_LEGACY_AVX2(fn) nullptr
#endif

const LegacyType kQ8_0Type = {"q8_0",
                              Kind::kQ8_0,
                              34,
                              &detail::dot_q8_0_scalar,
                              TANDEM_LEGACY_AVX2(dot_q8_0_avx2),
                              TANDEM_LEGACY_AVX2(dot_q8_0_avx512_vnni)};
const LegacyType kQ4_0Type = {"q4_0",
                              Kind::kQ4_0,
                              18,
                              &detail::dot_q4_0_scalar,
                              TANDEM_LEGACY_AVX2(dot_q4_0_avx2),
                              TANDEM_LEGACY_AVX2(dot_q4_0_avx512_vnni)};
const LegacyType kQ5_0Type = {"q5_0",
                              Kind::kQ5_0,
                              22,
                              &detail::dot_q5_0_scalar,
                              TANDEM_LEGACY_AVX2(dot_q5_0_avx2),
                              TANDEM_LEGACY_AVX2(dot_q5_0_avx512_vnni)};
const LegacyType kMxfp4Type = {"mxfp4",
                               Kind::kMxfp4,
                               17,
                               &detail::dot_mxfp4_scalar,
                               TANDEM_LEGACY_AVX2(dot_mxfp4_avx2),
                               TANDEM_LEGACY_AVX2(dot_mxfp4_avx512_vnni)};
const LegacyType* const kAllTypes[] = {&kQ8_0Type, &kQ4_0Type, &kQ5_0Type, &kMxfp4Type};
const LegacyType* const kAvx2Types[] = {&kQ8_0Type, &kQ4_0Type, &kQ5_0Type, &kMxfp4Type};

// The SIMD kernels of k this CPU runs (avx2, avx512-vnni), each with its variant's name.
struct SimdKernel {
  const char* variant;
  detail::QuantDotFn fn;
};

std::vector<SimdKernel> simd_kernels(const LegacyType& k) {
  std::vector<SimdKernel> out;
  if (have_avx2() && k.avx2 != nullptr) out.push_back({"avx2", k.avx2});
  if (testing::have_avx512_vnni() && k.avx512_vnni != nullptr) {
    out.push_back({"avx512-vnni", k.avx512_vnni});
  }
  return out;
}

float float_of_bits(uint32_t b) {
  float f = 0.0f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

// Sets the scale of every block of `rows` rows at w (row_bytes apart): fp16 d in [0.001, 0.01]
// for Q8_0 / Q4_0; for MXFP4 an exponent in 120..130 or, with `extremes`, now and then 0 or 1
// (2^-128, 2^-127, subnormal scales), and 254 (2^126, whose products overflow) in block 1 of every
// third row (rows 2, 5, ...; the others stay finite). Every other byte pattern is a valid block.
void set_random_scales(const LegacyType& k, uint8_t* w, size_t row_bytes, size_t rows, size_t cols,
                       bool extremes, std::mt19937& rng) {
  std::uniform_real_distribution<float> scale(0.001f, 0.01f);
  std::uniform_int_distribution<int> exponent(120, 130);
  std::uniform_int_distribution<int> percent(0, 99);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t b = 0; b < cols / kBlock; ++b) {
      uint8_t* block = w + r * row_bytes + b * k.block_bytes;
      if (k.kind != Kind::kMxfp4) {
        put_fp16(block, scale(rng));
        continue;
      }
      int e = exponent(rng);
      if (extremes) {
        const int p = percent(rng);
        if (p < 3) e = 0;
        if (p >= 3 && p < 6) e = 1;
        if (r % 3 == 2 && b == 1) e = 254;
      }
      block[0] = static_cast<uint8_t>(e);
    }
  }
}

// rows x cols random weights, row_bytes apart (>= the packed size; the gap is random too).
std::vector<uint8_t> random_weights(const LegacyType& k, size_t rows, size_t cols, size_t row_bytes,
                                    bool extremes, std::mt19937& rng) {
  std::vector<uint8_t> w(rows * row_bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& v : w) v = static_cast<uint8_t>(byte(rng));
  set_random_scales(k, w.data(), row_bytes, rows, cols, extremes, rng);
  return w;
}

QuantizedActivations quantize(const std::vector<float>& x, size_t n_tokens, size_t cols) {
  return testing::quantize(ActivationFormat::kQ8_0, x, n_tokens, cols);
}

QuantizedActivations random_activations(size_t n_tokens, size_t cols, std::mt19937& rng) {
  return testing::random_activations(ActivationFormat::kQ8_0, n_tokens, cols, rng);
}

// The weight row dequantized: dequantize() for Q8_0 / Q4_0, dequantize_mxfp4 (the routine behind
// dequantize()'s MXFP4 row) for MXFP4. All three are exact here: a small integer times an
// fp16 value or a power of two, with no overflow for the scales these tests use in references.
std::vector<float> dequantized(const LegacyType& k, const uint8_t* row, size_t cols) {
  std::vector<float> out(cols);
  const size_t bytes = cols / kBlock * k.block_bytes;
  if (k.kind == Kind::kMxfp4) {
    dequantize_mxfp4(row, out.data(), cols / kBlock);
  } else {
    const TensorType type = k.kind == Kind::kQ8_0   ? TensorType::kQ8_0
                            : k.kind == Kind::kQ5_0 ? TensorType::kQ5_0
                                                    : TensorType::kQ4_0;
    const Status s = dequantize(type, std::span<const uint8_t>(row, bytes), out);
    REQUIRE(s.ok());
  }
  return out;
}

// The independent reference: the dequantized weight row times the dequantized activation row
// (xq * dx, exact in double), summed in double, and the bound on |kernel - reference|:
//
// Let S = sum_e |w_e * xq_e * dx| over the row. Per block the kernel's isum is exact and so is
// float(isum) (|isum| <= 32 * 127 * 127 < 2^24); it rounds dw * dx (or dx * de) and the product
// with float(isum): the block's term is within 2u (u = 2^-24) of its exact value, whose magnitude
// is at most that block's part of S. Adding the terms in block order rounds each partial sum, which
// contributes at most (blocks - 1) u S. The reference's own error is ~cols * 2^-53 S (the
// dequantized weights and activations are exact). So |kernel - reference| <= (blocks + 1) u S plus
// second-order terms; the bound used is (blocks + 3) u S.
struct Reference {
  double value = 0.0;
  double bound = 0.0;
};

Reference reference_dot(const LegacyType& k, const uint8_t* row, const QuantizedActivations& a,
                        size_t t) {
  const size_t cols = a.cols;
  const size_t blocks = cols / kBlock;
  const std::vector<float> w = dequantized(k, row, cols);
  Reference ref;
  double s = 0.0;
  for (size_t e = 0; e < cols; ++e) {
    const double act =
        static_cast<double>(a.qs[t * cols + e]) * static_cast<double>(a.d[t * blocks + e / kBlock]);
    const double term = static_cast<double>(w[e]) * act;
    ref.value += term;
    s += std::fabs(term);
  }
  ref.bound = (static_cast<double>(blocks) + 3.0) * kUnit * s;
  return ref;
}

TEST_CASE("dequantize_mxfp4 gives kvalues[q] * 2^(e - 128) exactly", "[kernels]") {
  // Block b has exponent kExponents[b]; nibble codes: element j < 16 is code j, element j >= 16
  // is code 31 - j (low nibble of qs[j] = j, high nibble = 15 - j).
  constexpr uint8_t kExponents[] = {127, 128, 0, 1, 255, 254, 130};
  constexpr size_t kBlocks = sizeof(kExponents);
  std::vector<uint8_t> src(kBlocks * 17);
  for (size_t b = 0; b < kBlocks; ++b) {
    src[b * 17] = kExponents[b];
    for (size_t j = 0; j < 16; ++j) src[b * 17 + 1 + j] = static_cast<uint8_t>(j | (15 - j) << 4);
  }
  std::vector<float> out(kBlocks * kBlock, -1.0f);
  dequantize_mxfp4(src.data(), out.data(), kBlocks);
  auto code_of = [](size_t j) { return j < 16 ? j : 31 - j; };
  for (size_t b = 0; b < kBlocks; ++b) {
    for (size_t j = 0; j < kBlock; ++j) {
      const int v = kMxfp4Values[code_of(j)];
      // The exact value in double, then rounded to float (overflow gives an infinity).
      const float want =
          static_cast<float>(std::ldexp(static_cast<double>(v), kExponents[b] - 128));
      INFO("e " << static_cast<int>(kExponents[b]) << " element " << j);
      CHECK(bits_of(out[b * kBlock + j]) == bits_of(want));
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  // e = 127: 2^-1, the E2M1 values themselves.
  CHECK(out[0 * kBlock + 1] == 0.5f);
  CHECK(out[0 * kBlock + 7] == 6.0f);
  CHECK(out[0 * kBlock + 15] == -6.0f);
  CHECK(out[0 * kBlock + 16] == -6.0f);  // code 15
  // e = 128: 2^0.
  CHECK(out[1 * kBlock + 5] == 6.0f);
  CHECK(out[1 * kBlock + 9] == -1.0f);
  // e = 0: 2^-128, a subnormal (bit 21 alone); e = 1: 2^-127 (bit 22).
  CHECK(bits_of(out[2 * kBlock + 1]) == 0x00200000u);
  CHECK(bits_of(out[2 * kBlock + 9]) == 0x80200000u);
  CHECK(out[2 * kBlock + 7] == 12.0f * float_of_bits(0x00200000u));
  CHECK(bits_of(out[3 * kBlock + 1]) == 0x00400000u);
  CHECK(out[3 * kBlock + 3] == 3.0f * float_of_bits(0x00400000u));
  // e = 255 (E8M0's NaN code, not special-cased, as in ggml): 2^127, so +-1 gives +-2^127 and every
  // larger magnitude overflows to an infinity of its sign; code 0 / 8 stay 0.
  CHECK(out[4 * kBlock + 1] == std::ldexp(1.0f, 127));
  CHECK(out[4 * kBlock + 9] == -std::ldexp(1.0f, 127));
  CHECK(out[4 * kBlock + 2] == inf);
  CHECK(out[4 * kBlock + 15] == -inf);
  CHECK(out[4 * kBlock + 0] == 0.0f);
  // e = 254: 2^126; 12 * 2^126 = 1.5 * 2^129 overflows, 1 * 2^126 does not.
  CHECK(out[5 * kBlock + 1] == std::ldexp(1.0f, 126));
  CHECK(out[5 * kBlock + 7] == inf);
  CHECK(out[6 * kBlock + 7] == 48.0f);  // 12 * 2^2
}

TEST_CASE("legacy scalar dot products match the dequantized values in double", "[kernels]") {
  std::mt19937 rng(20240612);
  for (const LegacyType* k : kAllTypes) {
    for (const size_t cols : {32u, 96u, 512u, 2048u, 4096u}) {
      const size_t rows = 5, n_tokens = 3;
      const size_t row_bytes = cols / kBlock * k->block_bytes;
      const std::vector<uint8_t> w = random_weights(*k, rows, cols, row_bytes, false, rng);
      const QuantizedActivations a = random_activations(n_tokens, cols, rng);
      std::vector<float> y(n_tokens * rows);
      k->scalar(w.data(), row_bytes, rows, view_of(a), y.data(), rows);
      for (size_t t = 0; t < n_tokens; ++t) {
        for (size_t r = 0; r < rows; ++r) {
          const Reference ref = reference_dot(*k, w.data() + r * row_bytes, a, t);
          INFO(k->name << " cols " << cols << " token " << t << " row " << r);
          CHECK(ref.bound > 0.0);
          CHECK(std::fabs(static_cast<double>(y[t * rows + r]) - ref.value) <= ref.bound);
        }
      }
    }
  }
}

// Every SIMD kernel of every type in kAvx2Types against the scalar one on random weights: row
// counts around the AVX2 group (8) and the AVX-512 tile (16), token counts around the token tiles
// (1, 2, 3, 4, 8), row strides with padding, misaligned weights and a y stride with gaps (which
// must stay untouched).
void check_simd_against_scalar(const char* variant_wanted, uint32_t seed) {
  std::mt19937 rng(seed);
  size_t case_index = 0;
  for (const LegacyType* k : kAvx2Types) {
    for (const size_t rows : {1u, 7u, 8u, 9u, 15u, 16u, 17u, 33u, 50u}) {
      for (const size_t cols : {32u, 64u, 96u, 2048u}) {
        for (const size_t n_tokens : {1u, 2u, 3u, 5u, 8u, 11u, 17u}) {
          ++case_index;
          const size_t misalign = 1 + case_index % 3;
          const size_t packed_bytes = cols / kBlock * k->block_bytes;
          const size_t row_bytes = packed_bytes + 1 + case_index % 5;
          const size_t y_stride = rows + 1 + case_index % 4;
          // The weights at byte offset `misalign` of their buffer; MXFP4 gets extreme exponents
          // too (2^126 blocks may overflow to infinities, or NaN from inf - inf: still compared by
          // bit pattern).
          std::vector<uint8_t> buffer(misalign);
          const std::vector<uint8_t> w =
              random_weights(*k, rows, cols, row_bytes, k->kind == Kind::kMxfp4, rng);
          buffer.insert(buffer.end(), w.begin(), w.end());
          const uint8_t* wp = buffer.data() + misalign;
          const QuantizedActivations a = random_activations(n_tokens, cols, rng);
          const ActivationRows x = view_of(a);
          const std::vector<float> want = run_strided(k->scalar, wp, row_bytes, rows, x, y_stride);
          detail::QuantDotFn fn = nullptr;
          for (const SimdKernel& s : simd_kernels(*k)) {
            if (std::string_view(s.variant) == variant_wanted) fn = s.fn;
          }
          REQUIRE(fn != nullptr);
          const std::vector<float> got = run_strided(fn, wp, row_bytes, rows, x, y_stride);
          INFO(k->name << " " << variant_wanted << " rows " << rows << " cols " << cols
                       << " tokens " << n_tokens << " misalign " << misalign << " row_bytes "
                       << row_bytes << " y_stride " << y_stride);
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

TEST_CASE("legacy AVX2 dot products are bit-identical to the scalar ones", "[kernels]") {
  if (!have_avx2()) {
    WARN("legacy AVX2 dot products skipped: no AVX2");
    return;
  }
  check_simd_against_scalar("avx2", 11);
}

TEST_CASE("legacy AVX-512 VNNI dot products are bit-identical to the scalar ones", "[kernels]") {
  if (!testing::have_avx512_vnni()) {
    WARN("legacy AVX-512 VNNI dot products skipped: no AVX-512 F/BW/VL + VNNI on this CPU");
    return;
  }
  check_simd_against_scalar("avx512-vnni", 12);
}

// An activation view over caller-made buffers (quants outside what quantize_activations makes,
// such as -128, are allowed by the kernels' bounds).
struct HandActivations {
  std::vector<int8_t> qs;
  std::vector<float> d;
  ActivationRows view(size_t n_tokens, size_t cols) const {
    ActivationRows x;
    x.format = ActivationFormat::kQ8_0;
    x.n_tokens = n_tokens;
    x.cols = cols;
    x.qs = qs.data();
    x.d = d.data();
    return x;
  }
};

// One row of `blocks` blocks, every element the given code (4 bits for Q4_0 / MXFP4, 5 for Q5_0:
// its high bit set in every qh bit), scale 1.0 (fp16 d = 1, or e = 128).
std::vector<uint8_t> uniform_row(const LegacyType& k, size_t blocks, int code) {
  std::vector<uint8_t> row(blocks * k.block_bytes);
  for (size_t b = 0; b < blocks; ++b) {
    uint8_t* block = row.data() + b * k.block_bytes;
    size_t qs = 1;
    if (k.kind == Kind::kMxfp4) {
      block[0] = 128;
    } else {
      put_fp16(block, 1.0f);
      qs = 2;
    }
    if (k.kind == Kind::kQ5_0) {
      for (size_t j = 2; j < 6; ++j) block[j] = (code & 16) != 0 ? 0xff : 0x00;
      qs = 6;
    }
    const int nibble = code & 15;
    for (size_t j = 0; j < 16; ++j) block[qs + j] = static_cast<uint8_t>(nibble | nibble << 4);
  }
  return row;
}

TEST_CASE("legacy dot products at the extremes of the quants", "[kernels]") {
  if (!have_avx2()) WARN("legacy AVX2 extreme cases skipped: no AVX2 (scalar ones run)");
  if (!testing::have_avx512_vnni()) {
    WARN("legacy AVX-512 VNNI extreme cases skipped: no AVX-512 VNNI (scalar ones run)");
  }
  constexpr size_t kBlocks = 4, kCols = kBlocks * kBlock;
  struct Extreme {
    const LegacyType* type;
    int code;
    int value;  // the weight value of the code at scale 1
  };
  const Extreme extremes[] = {{&kQ4_0Type, 0, -8},    {&kQ4_0Type, 15, 7},  {&kMxfp4Type, 7, 12},
                              {&kMxfp4Type, 15, -12}, {&kMxfp4Type, 8, 0},  {&kQ4_0Type, 8, 0},
                              {&kQ5_0Type, 0, -16},   {&kQ5_0Type, 31, 15}, {&kQ5_0Type, 16, 0},
                              {&kQ5_0Type, 15, -1}};
  // Activations: token 0 all +127, token 1 all -127 (quantize_activations of +-1.0: d = 1/127 in
  // fp16), token 2 alternating signs per block; then hand-made token rows of -128 (d = 1).
  std::vector<float> xf(3 * kCols);
  for (size_t i = 0; i < kCols; ++i) {
    xf[i] = 1.0f;
    xf[kCols + i] = -1.0f;
    xf[2 * kCols + i] = (i / kBlock) % 2 == 0 ? 1.0f : -1.0f;
  }
  const QuantizedActivations a = quantize(xf, 3, kCols);
  REQUIRE(a.qs[0] == 127);
  REQUIRE(a.qs[kCols] == -127);
  HandActivations hand;
  hand.qs.assign(2 * kCols, -128);
  hand.d.assign(2 * kBlocks, 1.0f);
  for (const Extreme& e : extremes) {
    const LegacyType& k = *e.type;
    const std::vector<uint8_t> row = uniform_row(k, kBlocks, e.code);
    const size_t row_bytes = row.size();
    // Seventeen copies of the row: two full AVX2 row groups of 8 or one AVX-512 tile of 16, plus
    // one (a tail group).
    std::vector<uint8_t> w;
    for (int i = 0; i < 17; ++i) w.insert(w.end(), row.begin(), row.end());
    const size_t rows = 17;
    INFO(k.name << " code " << e.code);
    const double dx = static_cast<double>(a.d[0]);
    const double block_value = 32.0 * e.value * 127.0;  // isum of a +127 block
    const double blocks = static_cast<double>(kBlocks);
    const double want[3] = {blocks * block_value * dx, -blocks * block_value * dx, 0.0};
    std::vector<float> y(3 * rows);
    k.scalar(w.data(), row_bytes, rows, view_of(a), y.data(), rows);
    for (size_t t = 0; t < 3; ++t) {
      for (size_t r = 0; r < rows; ++r) {
        // Each of the 4 block terms T is within 2u |T| (the roundings of dw * dx and of the
        // product); the 3 additions add at most u (2 + 3) |T|: 13 u |T| < 4 u |want[0]|.
        CHECK(std::fabs(static_cast<double>(y[t * rows + r]) - want[t]) <=
              4.0 * kUnit * std::fabs(want[0]));
      }
    }
    std::vector<float> y_hand(2 * rows);
    k.scalar(w.data(), row_bytes, rows, hand.view(2, kCols), y_hand.data(), rows);
    CHECK(static_cast<double>(y_hand[0]) == blocks * 32.0 * e.value * -128.0);
    for (const SimdKernel& s : simd_kernels(k)) {
      INFO(s.variant);
      std::vector<float> y2(3 * rows);
      s.fn(w.data(), row_bytes, rows, view_of(a), y2.data(), rows);
      for (size_t i = 0; i < y.size(); ++i) CHECK(bits_of(y2[i]) == bits_of(y[i]));
      std::vector<float> y2_hand(2 * rows);
      s.fn(w.data(), row_bytes, rows, hand.view(2, kCols), y2_hand.data(), rows);
      for (size_t i = 0; i < y_hand.size(); ++i) CHECK(bits_of(y2_hand[i]) == bits_of(y_hand[i]));
    }
  }
}

TEST_CASE("legacy dot products with an all-zero activation block (d = 0)", "[kernels]") {
  if (!have_avx2()) WARN("legacy AVX2 zero-block cases skipped: no AVX2 (scalar ones run)");
  if (!testing::have_avx512_vnni()) {
    WARN("legacy AVX-512 VNNI zero-block cases skipped: no AVX-512 VNNI (scalar ones run)");
  }
  std::mt19937 rng(5);
  constexpr size_t kCols = 256, kRows = 11, kTokens = 3;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> xf(kTokens * kCols);
  for (float& v : xf) v = normal(rng);
  // Block 2 of token 0 and block 0 of token 2 all zero.
  for (size_t i = 0; i < kBlock; ++i) {
    xf[2 * kBlock + i] = 0.0f;
    xf[2 * kCols + i] = 0.0f;
  }
  const QuantizedActivations a = quantize(xf, kTokens, kCols);
  REQUIRE(a.d[2] == 0.0f);
  REQUIRE(a.d[2 * kCols / kBlock] == 0.0f);
  for (const LegacyType* k : kAllTypes) {
    const size_t row_bytes = kCols / kBlock * k->block_bytes;
    const std::vector<uint8_t> w = random_weights(*k, kRows, kCols, row_bytes, false, rng);
    std::vector<float> y(kTokens * kRows);
    k->scalar(w.data(), row_bytes, kRows, view_of(a), y.data(), kRows);
    for (size_t t = 0; t < kTokens; ++t) {
      for (size_t r = 0; r < kRows; ++r) {
        const Reference ref = reference_dot(*k, w.data() + r * row_bytes, a, t);
        INFO(k->name << " token " << t << " row " << r);
        CHECK(std::fabs(static_cast<double>(y[t * kRows + r]) - ref.value) <= ref.bound);
      }
    }
    for (const SimdKernel& s : simd_kernels(*k)) {
      INFO(k->name << " " << s.variant);
      std::vector<float> y2(kTokens * kRows);
      s.fn(w.data(), row_bytes, kRows, view_of(a), y2.data(), kRows);
      for (size_t i = 0; i < y.size(); ++i) CHECK(bits_of(y2[i]) == bits_of(y[i]));
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
