// The Q8_0 x Q8_0 SIMD kernels called directly against dot_q8_0_scalar, bit for bit: random
// shapes (misaligned rows, row strides, token counts that exercise every tile) and the integer
// extremes. Quantizers (ggml's, quantize_activations) make quants in -127..127. The AVX2 kernel's
// maddubs pairs need activations above -128; the AVX-512 VNNI kernel's biased quants (q + 128) hold
// for all of -128..127, which is checked too.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/quant_dot.h"
#include "tests/kernels/quant_dot_test_support.h"

namespace tandem::kernels {
namespace {

using testing::bits_of;
using testing::put_fp16;

constexpr size_t kBlock = 32;
constexpr size_t kBlockBytes = 34;

struct Variant {
  std::string name;
  detail::QuantDotFn fn;
  bool full_range = false;  // exact for activation quants of -128 too
};

std::vector<Variant> simd_variants() {
  std::vector<Variant> out;
#if defined(__x86_64__) || defined(_M_X64)
  const CpuFeatures& f = cpu_features();
  if (testing::have_avx2()) out.push_back({"avx2", &detail::dot_q8_0_avx2});
  if (testing::have_avx2() && f.avx512f && f.avx512bw && f.avx512vl && f.avx512_vnni) {
    out.push_back({"avx512-vnni", &detail::dot_q8_0_avx512_vnni, true});
  } else {
    WARN("no AVX-512 VNNI on this CPU: Q8_0 avx512-vnni case skipped");
  }
#endif
  return out;
}

// Activation rows owned here: quants and scales as given.
struct Rows {
  std::vector<int8_t> qs;
  std::vector<float> d;
  size_t n_tokens = 0;
  size_t cols = 0;
  ActivationRows view() const {
    ActivationRows x;
    x.format = ActivationFormat::kQ8_0;
    x.n_tokens = n_tokens;
    x.cols = cols;
    x.qs = qs.data();
    x.d = d.data();
    return x;
  }
};

// y for every written element (rows x tokens in a y_stride layout), NaN elsewhere.
std::vector<float> run(detail::QuantDotFn fn, const uint8_t* w, size_t row_bytes, size_t rows,
                       const ActivationRows& x, size_t y_stride) {
  std::vector<float> y(x.n_tokens * y_stride, NAN);
  fn(w, row_bytes, rows, x, y.data(), y_stride);
  return y;
}

size_t mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += bits_of(got[i]) != bits_of(want[i]) ? 1 : 0;
  return bad;
}

TEST_CASE("Q8_0 SIMD kernels are bit-identical to the scalar one", "[kernels][simd]") {
  const std::vector<Variant> variants = simd_variants();
  std::mt19937 rng(23);
  std::uniform_int_distribution<int> quant(-127, 127);
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  size_t case_index = 0;
  for (const size_t rows : {1u, 3u, 4u, 5u, 9u, 37u}) {
    for (const size_t cols : {32u, 96u, 2048u}) {
      for (const size_t n_tokens : {1u, 2u, 3u, 4u, 5u, 7u, 8u, 13u}) {
        ++case_index;
        const size_t misalign = case_index % 3;
        const size_t row_bytes = cols / kBlock * kBlockBytes + case_index % 5;
        const size_t y_stride = rows + case_index % 4;
        std::vector<uint8_t> buffer(misalign + rows * row_bytes);
        uint8_t* w = buffer.data() + misalign;
        for (size_t r = 0; r < rows; ++r) {
          for (size_t b = 0; b < cols / kBlock; ++b) {
            uint8_t* block = w + r * row_bytes + b * kBlockBytes;
            put_fp16(block, scale(rng));
            for (size_t i = 0; i < kBlock; ++i) block[2 + i] = static_cast<uint8_t>(quant(rng));
          }
        }
        Rows x;
        x.n_tokens = n_tokens;
        x.cols = cols;
        for (size_t i = 0; i < n_tokens * cols; ++i)
          x.qs.push_back(static_cast<int8_t>(quant(rng)));
        for (size_t i = 0; i < n_tokens * cols / kBlock; ++i) x.d.push_back(scale(rng));
        const std::vector<float> want =
            run(&detail::dot_q8_0_scalar, w, row_bytes, rows, x.view(), y_stride);
        for (const Variant& v : variants) {
          INFO(v.name << " rows " << rows << " cols " << cols << " tokens " << n_tokens);
          CHECK(mismatches(run(v.fn, w, row_bytes, rows, x.view(), y_stride), want) == 0);
        }
      }
    }
  }
}

TEST_CASE("Q8_0 kernels at the integer extremes", "[kernels][simd]") {
  const std::vector<Variant> variants = simd_variants();
  constexpr size_t kBlocks = 3, kCols = kBlocks * kBlock, kRows = 6;
  for (const int wq : {-128, -127, 127}) {
    for (const int xq : {-128, -127, 127}) {
      std::vector<uint8_t> w(kRows * kBlocks * kBlockBytes);
      for (size_t r = 0; r < kRows; ++r) {
        for (size_t b = 0; b < kBlocks; ++b) {
          uint8_t* block = w.data() + (r * kBlocks + b) * kBlockBytes;
          put_fp16(block, 1.0f);
          for (size_t i = 0; i < kBlock; ++i) block[2 + i] = static_cast<uint8_t>(wq);
        }
      }
      Rows x;
      x.n_tokens = 5;
      x.cols = kCols;
      x.qs.assign(x.n_tokens * kCols, static_cast<int8_t>(xq));
      x.d.assign(x.n_tokens * kBlocks, 1.0f);
      INFO("w " << wq << " x " << xq);
      const std::vector<float> want =
          run(&detail::dot_q8_0_scalar, w.data(), kBlocks * kBlockBytes, kRows, x.view(), kRows);
      // Exact in float: 96 products of at most 2^14 each.
      CHECK(static_cast<double>(want[0]) == static_cast<double>(kCols) * wq * xq);
      for (const Variant& v : variants) {
        if (xq == -128 && !v.full_range) continue;
        INFO(v.name);
        CHECK(mismatches(run(v.fn, w.data(), kBlocks * kBlockBytes, kRows, x.view(), kRows),
                         want) == 0);
      }
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
