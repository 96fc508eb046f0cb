// Tests of the IQ4_NL (x Q8_0) and IQ4_XS (x Q8_K) dot products (quant_dot.h): the scalar
// references against dequantize() in double, the AVX2 and AVX-512 VNNI variants bit-identical to
// them over many shapes and extreme inputs, and the types' rows in the weight-type table.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
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
#include "kernels/cpu/weight_matrix.h"
#include "kernels/cpu/weight_type_table.h"
#include "kernels/tensor_type.h"
#include "tests/kernels/quant_dot_test_support.h"

namespace tandem::kernels {
namespace {

using testing::bits_of;
using testing::have_avx2;
using testing::have_avx512_vnni;
using testing::put_fp16;
using testing::run_strided;

constexpr double kUnit = 1.0 / 16777216.0;  // 2^-24, the float unit roundoff

// One of the two types: block shape, activation format and kernels (the SIMD ones null where this
// build has no x86 kernels).
struct Iq4Type {
  const char* name;
  TensorType type;
  size_t block_elements;
  size_t block_bytes;
  ActivationFormat format;
  detail::QuantDotFn scalar;
  detail::QuantDotFn avx2;
  detail::QuantDotFn avx512_vnni;
};

#if defined(__x86_64__) || defined(_M_X64)
#define TANDEM_IQ4_X86(fn) &detail::fn
#else
#define TANDEM_IQ4_X86(fn) nullptr
#endif

const Iq4Type kNl = {"iq4_nl",
                     TensorType::kIQ4_NL,
                     32,
                     18,
                     ActivationFormat::kQ8_0,
                     &detail::dot_iq4_nl_scalar,
                     TANDEM_IQ4_X86(dot_iq4_nl_avx2),
                     TANDEM_IQ4_X86(dot_iq4_nl_avx512_vnni)};
const Iq4Type kXs = {"iq4_xs",
                     TensorType::kIQ4_XS,
                     256,
                     136,
                     ActivationFormat::kQ8_K,
                     &detail::dot_iq4_xs_scalar,
                     TANDEM_IQ4_X86(dot_iq4_xs_avx2),
                     TANDEM_IQ4_X86(dot_iq4_xs_avx512_vnni)};
const Iq4Type* const kTypes[] = {&kNl, &kXs};

// The kernel of `variant` ("avx2", "avx512-vnni") for k, or null where this CPU or build lacks it.
detail::QuantDotFn simd_kernel(const Iq4Type& k, const std::string& variant) {
  if (variant == "avx2") return have_avx2() ? k.avx2 : nullptr;
  return have_avx512_vnni() ? k.avx512_vnni : nullptr;
}

// Block scales: ordinary ones (fp16 d in +-[1e-3, 1e-2]); with `extremes`, one block in 8 gets an
// edge case: 0, the smallest and largest subnormal halves, -65504 or 65504 (whose products may
// overflow to infinities; results are still compared by bit pattern).
void set_scales(const Iq4Type& k, uint8_t* w, size_t row_bytes, size_t rows, size_t cols,
                bool extremes, std::mt19937& rng) {
  std::uniform_real_distribution<float> scale(1e-3f, 1e-2f);
  const uint16_t kEdges[] = {0x0000, 0x0001, 0x03ff, 0x8001, 0xfbff, 0x7bff};
  for (size_t r = 0; r < rows; ++r) {
    for (size_t b = 0; b < cols / k.block_elements; ++b) {
      uint8_t* block = w + r * row_bytes + b * k.block_bytes;
      put_fp16(block, (rng() % 2 == 0 ? 1.0f : -1.0f) * scale(rng));
      if (extremes && rng() % 8 == 0) {
        const uint16_t h = kEdges[rng() % 6];
        block[0] = static_cast<uint8_t>(h & 0xff);
        block[1] = static_cast<uint8_t>(h >> 8);
      }
    }
  }
}

// rows x cols random weights, row_bytes apart (the padding random too); every byte pattern of the
// quants and IQ4_XS's packed sub-block scales is valid.
std::vector<uint8_t> random_weights(const Iq4Type& k, size_t rows, size_t cols, size_t row_bytes,
                                    bool extremes, std::mt19937& rng) {
  std::vector<uint8_t> w(rows * row_bytes);
  for (uint8_t& v : w) v = static_cast<uint8_t>(rng());
  set_scales(k, w.data(), row_bytes, rows, cols, extremes, rng);
  return w;
}

// Activations in k's format owned by the test: either quantize_activations of normal floats, or
// (`full_range`) quants drawn from all of -128..127, which the kernels must take too, with random
// scales (Q8_0's fp16-representable) and, for Q8_K, the bsums of what was drawn.
struct Activations {
  QuantizedActivations a;
  ActivationRows view() const { return view_of(a); }
};

Activations make_activations(const Iq4Type& k, size_t n_tokens, size_t cols, bool full_range,
                             std::mt19937& rng) {
  Activations out;
  out.a = testing::random_activations(k.format, n_tokens, cols, rng);
  if (!full_range) return out;
  for (int8_t& q : out.a.qs) q = static_cast<int8_t>(rng());
  std::uniform_real_distribution<float> d(1e-3f, 1e-1f);
  for (float& v : out.a.d) {
    v = d(rng);
    if (k.format == ActivationFormat::kQ8_0) v = fp16_to_fp32(fp32_to_fp16_bits(v));
  }
  for (size_t i = 0; i < out.a.bsums.size(); ++i) {
    int s = 0;
    for (size_t j = 0; j < kQ8_KSumElements; ++j) s += out.a.qs[i * kQ8_KSumElements + j];
    out.a.bsums[i] = static_cast<int16_t>(s);
  }
  return out;
}

// The independent reference: dequantize()'s weights (exact here: an fp16 d times a value of at
// most 7 bits, for IQ4_XS times ls - 32 first, at most 24 significant bits in all) times xq * dx,
// summed in double. Bound on |kernel - reference|, S = sum |w * xq * dx| over the row: per block
// the kernel rounds dw * dx, the product with float(isum), and (IQ4_XS, |isum| can pass 2^24)
// float(isum) itself, so each term is within 3u of its exact value, at most its part of S; the
// block-order additions add (blocks - 1) u S. The bound used is (blocks + 4) u S.
struct Reference {
  double value = 0.0;
  double bound = 0.0;
};

Reference reference_dot(const Iq4Type& k, const uint8_t* row, const QuantizedActivations& a,
                        size_t t) {
  const size_t cols = a.cols;
  const size_t blocks = cols / k.block_elements;
  const size_t act_block = activation_block_elements(k.format);
  std::vector<float> w(cols);
  const Status s = dequantize(k.type, std::span<const uint8_t>(row, blocks * k.block_bytes), w);
  REQUIRE(s.ok());
  Reference ref;
  double total = 0.0;
  for (size_t e = 0; e < cols; ++e) {
    const double x = static_cast<double>(a.qs[t * cols + e]) *
                     static_cast<double>(a.d[t * (cols / act_block) + e / act_block]);
    const double term = static_cast<double>(w[e]) * x;
    ref.value += term;
    total += std::fabs(term);
  }
  ref.bound = (static_cast<double>(blocks) + 4.0) * kUnit * total;
  return ref;
}

TEST_CASE("iq4 scalar dot products match the dequantized values in double", "[kernels]") {
  std::mt19937 rng(20261203);
  for (const Iq4Type* k : kTypes) {
    for (const size_t cols : {256u, 512u, 1536u, 4096u}) {
      for (const bool full_range : {false, true}) {
        const size_t rows = 5, n_tokens = 3;
        const size_t row_bytes = cols / k->block_elements * k->block_bytes;
        const std::vector<uint8_t> w = random_weights(*k, rows, cols, row_bytes, false, rng);
        const Activations a = make_activations(*k, n_tokens, cols, full_range, rng);
        std::vector<float> y(n_tokens * rows);
        k->scalar(w.data(), row_bytes, rows, a.view(), y.data(), rows);
        for (size_t t = 0; t < n_tokens; ++t) {
          for (size_t r = 0; r < rows; ++r) {
            const Reference ref = reference_dot(*k, w.data() + r * row_bytes, a.a, t);
            INFO(k->name << " cols " << cols << " full_range " << full_range << " token " << t
                         << " row " << r);
            CHECK(ref.bound > 0.0);
            CHECK(std::fabs(static_cast<double>(y[t * rows + r]) - ref.value) <= ref.bound);
          }
        }
      }
    }
  }
}

// Every SIMD kernel against the scalar one: row counts around the AVX2 groups (8, and the 4-row
// K-quant tiles) and the AVX-512 tile (16), token counts around the token tiles, misaligned
// weights, padded row strides, a y stride whose gaps must stay untouched, extreme block scales and
// activation quants from all of -128..127 in every other case.
void check_simd_against_scalar(const std::string& variant, uint32_t seed) {
  std::mt19937 rng(seed);
  size_t case_index = 0;
  for (const Iq4Type* k : kTypes) {
    const detail::QuantDotFn fn = simd_kernel(*k, variant);
    REQUIRE(fn != nullptr);
    const std::vector<size_t> all_cols = k == &kNl
                                             ? std::vector<size_t>{32, 64, 96, 256, 1408, 2048}
                                             : std::vector<size_t>{256, 512, 1536, 2048};
    for (const size_t rows : {1u, 7u, 8u, 9u, 15u, 16u, 17u, 33u}) {
      for (const size_t cols : all_cols) {
        // From 16 tokens IQ4_XS takes the tokens in the lanes on AVX-512 VNNI, padding a last
        // partial register of any size (22, 28, 37).
        for (const size_t n_tokens : {1u, 2u, 3u, 4u, 5u, 8u, 11u, 16u, 17u, 22u, 28u, 37u}) {
          ++case_index;
          const size_t misalign = 1 + case_index % 3;
          const size_t packed_bytes = cols / k->block_elements * k->block_bytes;
          const size_t row_bytes = packed_bytes + case_index % 5;
          const size_t y_stride = rows + 1 + case_index % 4;
          std::vector<uint8_t> buffer(misalign);
          const std::vector<uint8_t> w = random_weights(*k, rows, cols, row_bytes, true, rng);
          buffer.insert(buffer.end(), w.begin(), w.end());
          const uint8_t* wp = buffer.data() + misalign;
          const Activations a = make_activations(*k, n_tokens, cols, case_index % 2 == 0, rng);
          const ActivationRows x = a.view();
          const std::vector<float> want = run_strided(k->scalar, wp, row_bytes, rows, x, y_stride);
          const std::vector<float> got = run_strided(fn, wp, row_bytes, rows, x, y_stride);
          INFO(k->name << " " << variant << " rows " << rows << " cols " << cols << " tokens "
                       << n_tokens << " misalign " << misalign << " row_bytes " << row_bytes
                       << " y_stride " << y_stride);
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

TEST_CASE("iq4 AVX2 dot products are bit-identical to the scalar ones", "[kernels]") {
  if (!have_avx2()) {
    WARN("iq4 AVX2 dot products skipped: no AVX2");
    return;
  }
  check_simd_against_scalar("avx2", 41);
}

TEST_CASE("iq4 AVX-512 VNNI dot products are bit-identical to the scalar ones", "[kernels]") {
  if (!have_avx512_vnni()) {
    WARN("iq4 AVX-512 VNNI dot products skipped: no AVX-512 F/BW/VL + VNNI on this CPU");
    return;
  }
  check_simd_against_scalar("avx512-vnni", 42);
}

// Every element the same code, every block scale 1 and every activation quant the same: the
// largest |products| (value -127 against -128 and 127), worked out by hand, and the SIMD variants
// equal to the scalar reference there.
TEST_CASE("iq4 dot products at the extremes of values and activations", "[kernels]") {
  if (!have_avx2()) WARN("iq4 AVX2 extreme cases skipped: no AVX2 (scalar ones run)");
  if (!have_avx512_vnni()) WARN("iq4 AVX-512 VNNI extreme cases skipped: no AVX-512 VNNI");
  constexpr int kValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                               1,    13,   25,  38,  53,  69,  89,  113};
  constexpr size_t kCols = 512, kRows = 17;
  std::mt19937 rng(3);
  for (const Iq4Type* k : kTypes) {
    for (const int code : {0, 7, 8, 15}) {
      for (const int xq : {-128, -127, 127, 1}) {
        const size_t row_bytes = kCols / k->block_elements * k->block_bytes;
        std::vector<uint8_t> w(kRows * row_bytes, static_cast<uint8_t>(code | code << 4));
        for (size_t b = 0; b < kRows * kCols / k->block_elements; ++b) {
          uint8_t* block = w.data() + b * k->block_bytes;
          put_fp16(block, 1.0f);
          if (k == &kXs) {
            // ls = 63 for every sub-block: scale 31 (and 0 = -32 in the second row, below).
            block[2] = block[3] = 0xff;
            for (int j = 4; j < 8; ++j) block[j] = 0xff;
          }
        }
        int scale = 1;
        if (k == &kXs) {
          scale = 31;
          for (size_t b = 0; b < kCols / 256; ++b) {  // row 1: ls = 0, scale -32
            uint8_t* block = w.data() + row_bytes + b * k->block_bytes;
            for (int j = 2; j < 8; ++j) block[j] = 0;
          }
        }
        Activations a;
        a.a = testing::random_activations(k->format, 1, kCols, rng);  // shaped, then overwritten
        for (int8_t& q : a.a.qs) q = static_cast<int8_t>(xq);
        for (float& d : a.a.d) d = 1.0f;
        for (int16_t& s : a.a.bsums) s = static_cast<int16_t>(16 * xq);
        std::vector<float> y(kRows);
        k->scalar(w.data(), row_bytes, kRows, a.view(), y.data(), kRows);
        INFO(k->name << " code " << code << " xq " << xq);
        const double value = kValues[code];
        CHECK(static_cast<double>(y[0]) == kCols * value * xq * scale);
        if (k == &kXs) CHECK(static_cast<double>(y[1]) == kCols * value * xq * -32.0);
        for (const char* variant : {"avx2", "avx512-vnni"}) {
          const detail::QuantDotFn fn = simd_kernel(*k, variant);
          if (fn == nullptr) continue;
          std::vector<float> y2(kRows);
          fn(w.data(), row_bytes, kRows, a.view(), y2.data(), kRows);
          INFO(variant);
          for (size_t r = 0; r < kRows; ++r) CHECK(bits_of(y2[r]) == bits_of(y[r]));
        }
      }
    }
  }
}

TEST_CASE("iq4 types have quantized rows in the weight-type table", "[kernels]") {
  const WeightTypeKernels* nl = weight_type_kernels(TensorType::kIQ4_NL);
  const WeightTypeKernels* xs = weight_type_kernels(TensorType::kIQ4_XS);
  REQUIRE(nl != nullptr);
  REQUIRE(xs != nullptr);
  CHECK(nl->activations == ActivationFormat::kQ8_0);
  CHECK(xs->activations == ActivationFormat::kQ8_K);
  CHECK(nl->dot[static_cast<size_t>(MatmulVariant::kScalar)] == &detail::dot_iq4_nl_scalar);
  CHECK(xs->dot[static_cast<size_t>(MatmulVariant::kScalar)] == &detail::dot_iq4_xs_scalar);
  CHECK(dequantize_supported(TensorType::kIQ4_NL));
  CHECK(dequantize_supported(TensorType::kIQ4_XS));
  CHECK(weight_type_names().find("iq4_nl") != std::string::npos);
  CHECK(weight_type_names().find("iq4_xs") != std::string::npos);
#if defined(__x86_64__) || defined(_M_X64)
  for (const MatmulVariant v : {MatmulVariant::kAvx2, MatmulVariant::kAvx512}) {
    CHECK(nl->dot[static_cast<size_t>(v)] == &detail::dot_iq4_nl_avx2);
    CHECK(xs->dot[static_cast<size_t>(v)] == &detail::dot_iq4_xs_avx2);
  }
  for (const MatmulVariant v : {MatmulVariant::kAvx512Vnni, MatmulVariant::kAmx}) {
    CHECK(nl->dot[static_cast<size_t>(v)] == &detail::dot_iq4_nl_avx512_vnni);
    CHECK(xs->dot[static_cast<size_t>(v)] == &detail::dot_iq4_xs_avx512_vnni);
  }
#endif
}

// What a model's weights go through: make_weight_matrix accepts the types (so does the loader's
// matrix-type check, which asks the same table), the quantized path of matmul gives the active
// variant's kernel, bit-identical to the scalar one on quantize_activations' rows, and the float
// path the float product of dequantize()'s weights.
TEST_CASE("iq4 weight matrices compute through matmul on both paths", "[kernels]") {
  std::mt19937 rng(7);
  constexpr size_t kRows = 9, kTokens = 3;
  for (const Iq4Type* k : kTypes) {
    const size_t cols = k == &kNl ? 1408 : 2048;  // IQ4_NL: a row that is no multiple of 256
    const size_t row_bytes = cols / k->block_elements * k->block_bytes;
    const std::vector<uint8_t> bytes = random_weights(*k, kRows, cols, row_bytes, false, rng);
    Result<WeightMatrix> w = make_weight_matrix(k->type, bytes, kRows, cols);
    REQUIRE(w.ok());
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(kTokens * cols);
    for (float& v : x) v = normal(rng);
    INFO(k->name);
    CHECK(matmul_activation_format(k->type, MatmulActivations::kQuantized) == k->format);

    std::vector<float> y(kTokens * kRows);
    matmul(*w, x, kTokens, y, MatmulActivations::kQuantized);
    const QuantizedActivations a = testing::quantize(k->format, x, kTokens, cols);
    std::vector<float> want(kTokens * kRows);
    k->scalar(bytes.data(), row_bytes, kRows, view_of(a), want.data(), kRows);
    for (size_t i = 0; i < y.size(); ++i) CHECK(bits_of(y[i]) == bits_of(want[i]));

    std::vector<float> yf(kTokens * kRows);
    matmul(*w, x, kTokens, yf, MatmulActivations::kFloat);
    std::vector<float> deq(cols);
    for (size_t r = 0; r < kRows; ++r) {
      REQUIRE(dequantize(k->type, std::span<const uint8_t>(bytes).subspan(r * row_bytes, row_bytes),
                         deq)
                  .ok());
      for (size_t t = 0; t < kTokens; ++t) {
        double exact = 0.0, abs_sum = 0.0;
        for (size_t c = 0; c < cols; ++c) {
          const double term = static_cast<double>(deq[c]) * static_cast<double>(x[t * cols + c]);
          exact += term;
          abs_sum += std::fabs(term);
        }
        // matmul.h's float-path bound: cols * 2^-24 * sum |x w|.
        CHECK(std::fabs(static_cast<double>(yf[t * kRows + r]) - exact) <=
              static_cast<double>(cols) * kUnit * abs_sum);
      }
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
