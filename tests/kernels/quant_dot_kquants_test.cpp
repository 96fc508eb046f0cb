// Tests of the K-quant dot products (Q2_K ... Q6_K weights x Q8_K activations, quant_dot.h):
// the scalar references against dequantize() in double, the AVX2 and AVX-512 VNNI variants
// bit-identical to them, and extreme inputs.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/matmul_dispatch.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/tensor_type.h"
#include "tests/kernels/quant_dot_test_support.h"

namespace tandem::kernels {
namespace {

using testing::bits_of;
using testing::have_avx2;
using testing::put_fp16;

constexpr size_t kSuper = 256;
constexpr double kUnit = 1.0 / 16777216.0;  // 2^-24, the float unit roundoff

// One K-quant weight type: its block size, where its fp16 scales and its packed group scales sit
// in a block, its kernels.
struct KQuant {
  const char* name;
  TensorType type;
  size_t block_bytes;
  size_t d_offset;
  bool has_dmin;  // an fp16 dmin right after d (Q2_K, Q4_K, Q5_K)
  size_t scales_offset;
  size_t scales_bytes;
  detail::QuantDotFn scalar;
  detail::QuantDotFn avx2;           // null where this build has no x86 kernels
  detail::QuantDotFn avx512_vnni;    // null where this build has no x86 kernels
  detail::QuantDotFn amx = nullptr;  // the plain-row AMX kernel, where the type has one
};

#if defined(__x86_64__) || defined(_M_X64)
#define TANDEM_KQ_AVX2(fn) &detail::fn
#else
#define TANDEM_KQ_AVX2(fn) nullptr
#endif

const KQuant kTypes[] = {
    {"q2_K", TensorType::kQ2_K, 84, 80, true, 0, 16, &detail::dot_q2_k_scalar,
     TANDEM_KQ_AVX2(dot_q2_k_avx2), TANDEM_KQ_AVX2(dot_q2_k_avx512_vnni)},
    {"q3_K", TensorType::kQ3_K, 110, 108, false, 96, 12, &detail::dot_q3_k_scalar,
     TANDEM_KQ_AVX2(dot_q3_k_avx2), TANDEM_KQ_AVX2(dot_q3_k_avx512_vnni)},
    {"q4_K", TensorType::kQ4_K, 144, 0, true, 4, 12, &detail::dot_q4_k_scalar,
     TANDEM_KQ_AVX2(dot_q4_k_avx2), TANDEM_KQ_AVX2(dot_q4_k_avx512_vnni)},
    {"q5_K", TensorType::kQ5_K, 176, 0, true, 4, 12, &detail::dot_q5_k_scalar,
     TANDEM_KQ_AVX2(dot_q5_k_avx2), TANDEM_KQ_AVX2(dot_q5_k_avx512_vnni),
     TANDEM_KQ_AVX2(dot_q5_k_amx)},
    {"q6_K", TensorType::kQ6_K, 210, 208, false, 192, 16, &detail::dot_q6_k_scalar,
     TANDEM_KQ_AVX2(dot_q6_k_avx2), TANDEM_KQ_AVX2(dot_q6_k_avx512_vnni),
     TANDEM_KQ_AVX2(dot_q6_k_amx)},
};

// The SIMD kernels of k this CPU runs: AVX2, AVX-512 VNNI (its absence reported once) and AMX.
std::vector<std::pair<const char*, detail::QuantDotFn>> simd_kernels(const KQuant& k) {
  std::vector<std::pair<const char*, detail::QuantDotFn>> out;
  if (have_avx2() && k.avx2 != nullptr) out.emplace_back("avx2", k.avx2);
  const CpuFeatures& f = cpu_features();
  if (have_avx2() && f.avx512f && f.avx512bw && f.avx512vl && f.avx512_vnni &&
      k.avx512_vnni != nullptr) {
    out.emplace_back("avx512-vnni", k.avx512_vnni);
  }
  if (k.amx != nullptr && matmul_variant_supported(MatmulVariant::kAmx)) {
    out.emplace_back("amx", k.amx);
  }
  return out;
}

// Sets every block's fp16 d (and dmin) of `rows` rows at `w` (row_bytes apart) to random values in
// [0.001, 0.01]. Every other byte pattern of these types is a valid block.
void set_random_scales(const KQuant& k, uint8_t* w, size_t row_bytes, size_t rows, size_t cols,
                       std::mt19937& rng) {
  std::uniform_real_distribution<float> scale(0.001f, 0.01f);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t b = 0; b < cols / kSuper; ++b) {
      uint8_t* blk = w + r * row_bytes + b * k.block_bytes;
      put_fp16(blk + k.d_offset, scale(rng));
      if (k.has_dmin) put_fp16(blk + k.d_offset + 2, scale(rng));
    }
  }
}

// rows x cols random weights, rows packed (row_bytes = the row's size).
std::vector<uint8_t> random_weights(const KQuant& k, size_t rows, size_t cols, std::mt19937& rng) {
  std::vector<uint8_t> w(rows * (cols / kSuper) * k.block_bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& v : w) v = static_cast<uint8_t>(byte(rng));
  set_random_scales(k, w.data(), cols / kSuper * k.block_bytes, rows, cols, rng);
  return w;
}

QuantizedActivations quantize(const std::vector<float>& x, size_t n_tokens, size_t cols) {
  return testing::quantize(ActivationFormat::kQ8_K, x, n_tokens, cols);
}

QuantizedActivations random_activations(size_t n_tokens, size_t cols, std::mt19937& rng) {
  return testing::random_activations(ActivationFormat::kQ8_K, n_tokens, cols, rng);
}

std::vector<float> dequantized(const KQuant& k, const uint8_t* row, size_t cols) {
  std::vector<float> out(cols);
  const Status s =
      dequantize(k.type, std::span<const uint8_t>(row, cols / kSuper * k.block_bytes), out);
  REQUIRE(s.ok());
  return out;
}

// The independent reference: dequantize() the weight row and the activation row (q * d, exact in
// double), dot in double. Also returns the bound on |kernel - reference|, derived as follows.
//
// Let S = sum_e |dx * xq_e| * (dw * scale * |q_e| + dmin * min), the sum of the magnitudes of all
// terms of the exact expansion (no dmin: sum_e |dx * xq_e * dw * scale * q_e|). The kernel's
// integer parts are exact; per block it rounds float(isum), dw * dx and their product (error <=
// 3u of that term's magnitude, u = 2^-24), the same for the min term, then the subtraction (u), so
// each block's term is within 4u of its block's part of S; the block sum adds (blocks - 1) u S.
// dequantize() rounds each weight at most 3 times (d * scale, * q, - dmin * min): 3u S; the double
// dot adds ~cols * 2^-53 S. So |kernel - reference| <= (blocks + 6) u S plus second-order terms;
// the bound used is (blocks + 8) u S. S itself comes from dequantize() of the row with every dmin
// negated (d * scale * q + dmin * min, all terms non-negative) or, with no dmin, of the row as is.
struct Reference {
  double value = 0.0;
  double bound = 0.0;
};

Reference reference_dot(const KQuant& k, const uint8_t* row, const QuantizedActivations& a,
                        size_t t) {
  const size_t cols = a.cols;
  const size_t blocks = cols / kSuper;
  const std::vector<float> w = dequantized(k, row, cols);
  std::vector<uint8_t> flipped(row, row + blocks * k.block_bytes);
  if (k.has_dmin) {
    for (size_t b = 0; b < blocks; ++b) flipped[b * k.block_bytes + k.d_offset + 3] ^= 0x80;
  }
  const std::vector<float> magnitude = dequantized(k, flipped.data(), cols);
  Reference ref;
  double s = 0.0;
  for (size_t e = 0; e < cols; ++e) {
    const double act =
        static_cast<double>(a.qs[t * cols + e]) * static_cast<double>(a.d[t * blocks + e / kSuper]);
    ref.value += static_cast<double>(w[e]) * act;
    s += std::fabs(static_cast<double>(magnitude[e])) * std::fabs(act);
  }
  ref.bound = (static_cast<double>(blocks) + 8.0) * kUnit * s;
  return ref;
}

TEST_CASE("k-quant scalar dot products match dequantize() in double", "[kernels]") {
  std::mt19937 rng(20240611);
  for (const KQuant& k : kTypes) {
    for (const size_t cols : {256u, 512u, 2048u, 4096u}) {
      const size_t rows = 5, n_tokens = 3;
      const std::vector<uint8_t> w = random_weights(k, rows, cols, rng);
      const QuantizedActivations a = random_activations(n_tokens, cols, rng);
      const size_t row_bytes = cols / kSuper * k.block_bytes;
      std::vector<float> y(n_tokens * rows);
      k.scalar(w.data(), row_bytes, rows, view_of(a), y.data(), rows);
      for (size_t t = 0; t < n_tokens; ++t) {
        for (size_t r = 0; r < rows; ++r) {
          const Reference ref = reference_dot(k, w.data() + r * row_bytes, a, t);
          INFO(k.name << " cols " << cols << " token " << t << " row " << r);
          CHECK(ref.bound > 0.0);
          CHECK(std::fabs(static_cast<double>(y[t * rows + r]) - ref.value) <= ref.bound);
        }
      }
    }
  }
}

// Runs fn over a rows x cols matrix stored row_bytes apart at a misaligned address, into y of
// y_stride > rows pre-filled with NaN.
std::vector<float> run_strided(detail::QuantDotFn fn, const uint8_t* w, size_t row_bytes,
                               size_t rows, const ActivationRows& x, size_t y_stride) {
  std::vector<float> y(x.n_tokens * y_stride + 3, std::numeric_limits<float>::quiet_NaN());
  fn(w, row_bytes, rows, x, y.data(), y_stride);
  return y;
}

TEST_CASE("k-quant AVX2 and AVX-512 VNNI dot products are bit-identical to the scalar ones",
          "[kernels]") {
  if (!have_avx2()) {
    WARN("k-quant AVX2 dot products skipped: no AVX2");
    return;
  }
  if (simd_kernels(kTypes[0]).size() < 2) {
    WARN("no AVX-512 VNNI on this CPU: k-quant avx512-vnni case skipped");
  }
  std::mt19937 rng(7);
  size_t case_index = 0;
  for (const KQuant& k : kTypes) {
    REQUIRE(k.avx2 != nullptr);
    for (const size_t rows : {1u, 7u, 8u, 9u, 15u, 16u, 17u, 33u}) {
      // 2304 columns: 9 super-blocks, more than the Q2_K / Q3_K batched tiles unpack at once.
      for (const size_t cols : {256u, 512u, 2048u, 2304u}) {
        // 1 to 17 tokens, then 22, 37 and 77: the tokens-in-lanes walk of Q2_K and Q3_K (from 16
        // or 32 tokens on AVX2, 64 on AVX-512 VNNI; a padded or leftover last register).
        for (const size_t n_tokens : {1u,  2u,  3u,  4u,  5u,  6u,  7u,  8u,  9u,  10u,
                                      11u, 12u, 13u, 14u, 15u, 16u, 17u, 22u, 37u, 77u}) {
          ++case_index;
          const size_t misalign = 1 + case_index % 3;
          const size_t packed_bytes = cols / kSuper * k.block_bytes;
          const size_t row_bytes = packed_bytes + 1 + case_index % 5;
          const size_t y_stride = rows + 1 + case_index % 4;
          // Random bytes everywhere, including the padding between rows.
          std::vector<uint8_t> buffer(misalign + rows * row_bytes);
          std::uniform_int_distribution<int> byte(0, 255);
          for (uint8_t& v : buffer) v = static_cast<uint8_t>(byte(rng));
          uint8_t* w = buffer.data() + misalign;
          set_random_scales(k, w, row_bytes, rows, cols, rng);
          const QuantizedActivations a = random_activations(n_tokens, cols, rng);
          const ActivationRows x = view_of(a);

          const std::vector<float> y_scalar =
              run_strided(k.scalar, w, row_bytes, rows, x, y_stride);
          for (const auto& [variant, fn] : simd_kernels(k)) {
            const std::vector<float> y_avx2 = run_strided(fn, w, row_bytes, rows, x, y_stride);
            // The scalar kernel on the same rows packed, to check it honours row_bytes / y_stride.
            std::vector<uint8_t> packed(rows * packed_bytes);
            for (size_t r = 0; r < rows; ++r) {
              std::memcpy(packed.data() + r * packed_bytes, w + r * row_bytes, packed_bytes);
            }
            std::vector<float> y_packed(n_tokens * rows);
            k.scalar(packed.data(), packed_bytes, rows, x, y_packed.data(), rows);

            INFO(k.name << " " << variant << " rows " << rows << " cols " << cols << " tokens "
                        << n_tokens << " misalign " << misalign << " row_bytes " << row_bytes
                        << " y_stride " << y_stride);
            size_t mismatches = 0, clobbered = 0;
            for (size_t i = 0; i < y_scalar.size(); ++i) {
              const size_t t = i / y_stride, r = i % y_stride;
              const bool written = t < n_tokens && r < rows;
              if (written) {
                if (bits_of(y_scalar[i]) != bits_of(y_avx2[i]) ||
                    bits_of(y_scalar[i]) != bits_of(y_packed[t * rows + r]) ||
                    std::isnan(y_scalar[i])) {
                  ++mismatches;
                }
              } else if (!std::isnan(y_scalar[i]) || !std::isnan(y_avx2[i])) {
                ++clobbered;
              }
            }
            CHECK(mismatches == 0);
            CHECK(clobbered == 0);
          }
        }
      }
    }
  }
}

// Checks every kernel of k on `rows` rows of w (packed) against x: the scalar one within the
// reference bound, the AVX2 one (where the CPU has it) bit-identical to it.
void check_against_reference(const KQuant& k, const std::vector<uint8_t>& w, size_t rows,
                             const QuantizedActivations& a) {
  const size_t row_bytes = a.cols / kSuper * k.block_bytes;
  std::vector<float> y_scalar(a.n_tokens * rows);
  k.scalar(w.data(), row_bytes, rows, view_of(a), y_scalar.data(), rows);
  for (size_t t = 0; t < a.n_tokens; ++t) {
    for (size_t r = 0; r < rows; ++r) {
      const Reference ref = reference_dot(k, w.data() + r * row_bytes, a, t);
      INFO(k.name << " token " << t << " row " << r << " got " << y_scalar[t * rows + r]
                  << " reference " << ref.value);
      CHECK(std::fabs(static_cast<double>(y_scalar[t * rows + r]) - ref.value) <= ref.bound);
    }
  }
  for (const auto& [variant, fn] : simd_kernels(k)) {
    std::vector<float> y_simd(a.n_tokens * rows);
    fn(w.data(), row_bytes, rows, view_of(a), y_simd.data(), rows);
    for (size_t i = 0; i < y_simd.size(); ++i) {
      INFO(k.name << " " << variant << " element " << i);
      CHECK(bits_of(y_simd[i]) == bits_of(y_scalar[i]));
    }
  }
}

TEST_CASE("k-quant dot products at extreme inputs", "[kernels]") {
  if (!have_avx2()) WARN("k-quant AVX2 extreme cases skipped: no AVX2 (scalar ones run)");
  constexpr size_t kCols = 3 * kSuper, kTokens = 4;
  // Token 0: all +1 (every quant -127); token 1: alternating +-1 (quants -+127); token 2: block 1
  // all zero (d = 0, zero quants and bsums), the rest normal; token 3: +1 then all -1 (the first
  // element of largest magnitude maps to -127, so all the others to +127).
  std::mt19937 rng(99);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(kTokens * kCols);
  for (size_t e = 0; e < kCols; ++e) {
    x[e] = 1.0f;
    x[kCols + e] = e % 2 == 0 ? 1.0f : -1.0f;
    x[2 * kCols + e] = e / kSuper == 1 ? 0.0f : normal(rng);
    x[3 * kCols + e] = e == 0 ? 1.0f : -1.0f;
  }
  const QuantizedActivations a = quantize(x, kTokens, kCols);
  REQUIRE(a.qs[0] == -127);
  REQUIRE(a.qs[kCols + 1] == 127);
  REQUIRE(a.d[2 * 3 + 1] == 0.0f);
  REQUIRE(a.qs[3 * kCols + 1] == 127);

  for (const KQuant& k : kTypes) {
    // Every quant byte, scale and min at one fill pattern (0xff: largest quants, scales and
    // mins; for Q6_K also 0x00 = quant -32 with scale -128, the largest |q * scale|; for Q3_K
    // 0x00 = quant -4 with scale -32, the largest).
    for (const uint8_t quant_fill : {uint8_t{0xff}, uint8_t{0x00}}) {
      for (const uint8_t scale_fill :
           {uint8_t{0xff}, uint8_t{0x80}, uint8_t{0x7f}, uint8_t{0x00}}) {
        // 17 rows: a whole 16 (the AMX tiles) and one more.
        const size_t rows = 17;
        std::vector<uint8_t> w(rows * (kCols / kSuper) * k.block_bytes, quant_fill);
        for (size_t r = 0; r < rows; ++r) {
          for (size_t b = 0; b < kCols / kSuper; ++b) {
            uint8_t* blk = w.data() + (r * (kCols / kSuper) + b) * k.block_bytes;
            // The group scale bytes: 16 nibble pairs (Q2_K), 12 packed 6-bit values (Q3_K) or
            // pairs (Q4_K/Q5_K), or 16 int8 (Q6_K).
            std::memset(blk + k.scales_offset, scale_fill, k.scales_bytes);
            put_fp16(blk + k.d_offset, r % 2 == 0 ? 0.01f : 0.0037f);
            if (k.has_dmin) put_fp16(blk + k.d_offset + 2, r % 2 == 0 ? 0.01f : 0.0021f);
          }
        }
        INFO(k.name << " quant bytes " << int{quant_fill} << " scale bytes " << int{scale_fill});
        check_against_reference(k, w, rows, a);
      }
    }
  }
}

// The Q2_K / Q3_K batched tiles add 127 to the scaled Q3_K quants and take the activation quants
// as int8, so the activation extremes -128 and 127 (which Q8_K allows, though the quantizer
// rarely makes -128) are checked directly, with weights at their extremes too, over 18
// super-blocks (more than one unpacked chunk) and rows / tokens that leave remainders (3 and 7
// tokens: a last group of three, which AVX-512 VNNI passes as such).
TEST_CASE("Q2_K and Q3_K SIMD dot products at activation quants -128 and 127", "[kernels]") {
  if (!have_avx2()) {
    WARN("Q2_K / Q3_K activation extremes skipped: no AVX2");
    return;
  }
  constexpr size_t kCols = 18 * kSuper, kRows = 9;
  std::mt19937 rng(5);
  for (const size_t n_tokens : {3u, 7u, 9u}) {
    QuantizedActivations a = random_activations(n_tokens, kCols, rng);
    std::uniform_int_distribution<int> pick(0, 3);
    for (size_t i = 0; i < a.qs.size(); ++i) {
      const int p = pick(rng);
      if (p < 2) a.qs[i] = p == 0 ? int8_t{-128} : int8_t{127};
      if (i / kCols == 0) a.qs[i] = -128;  // token 0: all -128
    }
    for (size_t g = 0; g < a.bsums.size(); ++g) {
      int sum = 0;
      for (size_t i = 0; i < 16; ++i) sum += a.qs[16 * g + i];
      a.bsums[g] = static_cast<int16_t>(sum);
    }
    for (const KQuant& k : kTypes) {
      if (k.type != TensorType::kQ2_K && k.type != TensorType::kQ3_K) continue;
      const size_t row_bytes = kCols / kSuper * k.block_bytes;
      for (const int fill : {-1, 0x00, 0xff}) {
        std::vector<uint8_t> w = random_weights(k, kRows, kCols, rng);
        if (fill >= 0) {
          // Every quant and scale byte at one value (Q3_K 0x00: quant -4 with scale -32, whose
          // product 128 is the largest).
          for (size_t r = 0; r < kRows; ++r) {
            for (size_t b = 0; b < kCols / kSuper; ++b) {
              uint8_t* blk = w.data() + r * row_bytes + b * k.block_bytes;
              std::memset(blk, fill, k.d_offset);
              put_fp16(blk + k.d_offset, 0.01f);
              if (k.has_dmin) put_fp16(blk + k.d_offset + 2, 0.0021f);
            }
          }
        }
        std::vector<float> y_scalar(n_tokens * kRows);
        k.scalar(w.data(), row_bytes, kRows, view_of(a), y_scalar.data(), kRows);
        for (const auto& [variant, fn] : simd_kernels(k)) {
          std::vector<float> y_simd(n_tokens * kRows);
          fn(w.data(), row_bytes, kRows, view_of(a), y_simd.data(), kRows);
          size_t mismatches = 0;
          for (size_t i = 0; i < y_simd.size(); ++i) {
            if (bits_of(y_simd[i]) != bits_of(y_scalar[i]) || std::isnan(y_scalar[i])) ++mismatches;
          }
          INFO(k.name << " " << variant << " fill " << fill << " tokens " << n_tokens);
          CHECK(mismatches == 0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
