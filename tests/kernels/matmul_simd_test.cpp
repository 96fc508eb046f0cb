// Tests of the run-time-dispatched SIMD matmul kernels: every variant this CPU supports against the
// scalar reference (int8 path bit-identical, float path within the summation-order bound) and
// against the numpy/gguf-py fixtures, plus the dispatch rules.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_dispatch.h"
#include "kernels/cpu/matmul_kernels.h"
#include "tests/kernels/kernel_fixture.h"

namespace tandem::kernels {
namespace {

// The quantized path on Q8_0 weights over rows [r0, r1): y[t * w.rows + r].
void q8_0_rows(const WeightMatrix& w, const QuantizedActivations& xq, std::vector<float>& y,
               size_t r0, size_t r1) {
  matmul_rows(w, view_of(xq), y.data() + r0, w.rows, r0, r1);
}

constexpr double kUnit = 1.0 / 16777216.0;  // 2^-24

const std::vector<MatmulVariant> kAllVariants(kMatmulVariants.begin(), kMatmulVariants.end());

std::vector<MatmulVariant> supported_simd_variants() {
  std::vector<MatmulVariant> out;
  for (MatmulVariant v : kAllVariants) {
    if (v != MatmulVariant::kScalar && matmul_variant_supported(v)) out.push_back(v);
  }
  return out;
}

// Restores the default variant when a test ends.
struct VariantGuard {
  MatmulVariant saved = active_matmul_variant();
  ~VariantGuard() { set_matmul_variant(saved); }
};

// rows x cols weights of `type` with random contents in bytes, at byte offset `misalign` of the
// buffer (so the matrix data may be unaligned).
struct RandomWeights {
  std::vector<uint8_t> buffer;
  WeightMatrix w;
};

RandomWeights random_weights(TensorType type, size_t rows, size_t cols, size_t misalign,
                             std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint8_t> bytes;
  const size_t n = rows * cols;
  auto put16 = [&bytes](uint16_t v) {
    bytes.push_back(static_cast<uint8_t>(v));
    bytes.push_back(static_cast<uint8_t>(v >> 8));
  };
  switch (type) {
    case TensorType::kF32:
      for (size_t i = 0; i < n; ++i) {
        const float f = normal(rng);
        uint8_t b[4];
        std::memcpy(b, &f, 4);
        bytes.insert(bytes.end(), b, b + 4);
      }
      break;
    case TensorType::kF16:
      // Occasional tiny values exercise fp16 subnormals.
      for (size_t i = 0; i < n; ++i) {
        put16(fp32_to_fp16_bits(normal(rng) * (i % 97 == 0 ? 1e-6f : 1.0f)));
      }
      break;
    case TensorType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        const float f = normal(rng);
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        put16(static_cast<uint16_t>(bits >> 16));
      }
      break;
    case TensorType::kQ8_0: {
      std::uniform_int_distribution<int> q(-128, 127);  // -128 is legal in a file
      for (size_t b = 0; b < n / 32; ++b) {
        put16(fp32_to_fp16_bits(0.01f * (1.0f + std::fabs(normal(rng))) *
                                (b % 13 == 0 ? 1e-4f : 1.0f)));
        for (size_t j = 0; j < 32; ++j) bytes.push_back(static_cast<uint8_t>(q(rng)));
      }
      break;
    }
    case TensorType::kF8_E4M3_B128: {
      std::uniform_int_distribution<int> code(0, 255);
      for (size_t b = 0; b < n / 128; ++b) {
        // Block scales of the usual size and, now and then, tiny or subnormal ones.
        const float scale = (b % 7 == 3   ? 1e-39f
                             : b % 5 == 1 ? 1e-30f
                                          : 0.002f) *
                            (1.0f + std::fabs(normal(rng)));
        uint8_t sb[4];
        std::memcpy(sb, &scale, 4);
        bytes.insert(bytes.end(), sb, sb + 4);
        for (size_t j = 0; j < 128; ++j) {
          int c = code(rng);
          if ((c & 0x7f) == 0x7f) c ^= 1;  // the layout holds no NaN codes
          bytes.push_back(static_cast<uint8_t>(c));
        }
      }
      break;
    }
    default:
      FAIL("unsupported test type");
  }
  RandomWeights out;
  out.buffer.assign(misalign, 0);
  out.buffer.insert(out.buffer.end(), bytes.begin(), bytes.end());
  Result<WeightMatrix> w =
      make_weight_matrix(type, std::span<const uint8_t>(out.buffer).subspan(misalign), rows, cols);
  REQUIRE(w.ok());
  out.w = *w;
  return out;
}

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = normal(rng);
  return v;
}

std::vector<float> weights_as_float(const WeightMatrix& w) {
  std::vector<float> f(w.rows * w.cols);
  weight_rows_to_float(w, 0, w.rows, f);
  return f;
}

// Runs matmul_rows over [row_begin, row_end) on x placed at float offset `x_offset` of its buffer;
// elements outside the range stay NaN.
std::vector<float> run_rows(const WeightMatrix& w, const std::vector<float>& x, size_t n_tokens,
                            size_t row_begin, size_t row_end, size_t x_offset) {
  std::vector<float> xbuf(x_offset, 0.0f);
  xbuf.insert(xbuf.end(), x.begin(), x.end());
  std::vector<float> y(n_tokens * w.rows, NAN);
  matmul_rows(w, std::span<const float>(xbuf).subspan(x_offset), n_tokens, y, row_begin, row_end);
  return y;
}

TEST_CASE("dispatch picks a supported variant and honours overrides", "[kernels][simd]") {
  VariantGuard guard;
  CHECK(matmul_variant_supported(MatmulVariant::kScalar));
  CHECK(matmul_variant_supported(best_matmul_variant()));
  CHECK(matmul_variant_supported(active_matmul_variant()));
  for (MatmulVariant v : kAllVariants) {
    const MatmulVariant chosen = set_matmul_variant(v);
    CHECK(matmul_variant_supported(chosen));
    CHECK(static_cast<int>(chosen) <= static_cast<int>(v));
    if (matmul_variant_supported(v)) CHECK(chosen == v);
    CHECK(active_matmul_variant() == chosen);
    CHECK(active_matmul_variant_name() == matmul_variant_name(chosen));
  }
  CHECK(matmul_variant_for_setting(nullptr) == best_matmul_variant());
  CHECK(matmul_variant_for_setting("scalar") == MatmulVariant::kScalar);
  CHECK(matmul_variant_for_setting("bogus") == best_matmul_variant());
  const MatmulVariant avx2 = matmul_variant_for_setting("avx2");
  CHECK(avx2 == (matmul_variant_supported(MatmulVariant::kAvx2) ? MatmulVariant::kAvx2
                                                                : MatmulVariant::kScalar));
  const MatmulVariant avx512 = matmul_variant_for_setting("avx512");
  CHECK(matmul_variant_supported(avx512));
  if (matmul_variant_supported(MatmulVariant::kAvx512)) {
    CHECK((avx512 == MatmulVariant::kAvx512 || avx512 == MatmulVariant::kAvx512Vnni));
  } else {
    CHECK(avx512 == avx2);
  }
  CHECK(matmul_variant_name(MatmulVariant::kAvx512Vnni) == "avx512-vnni");
  const MatmulVariant amx = matmul_variant_for_setting("amx");
  CHECK(amx == (matmul_variant_supported(MatmulVariant::kAmx) ? MatmulVariant::kAmx : avx512));
  CHECK(matmul_variant_name(MatmulVariant::kAmx) == "amx");
}

TEST_CASE("select_matmul_kernels makes a setting's variant the active one", "[kernels][simd]") {
  VariantGuard guard;
  CHECK(select_matmul_kernels("scalar", "test") == MatmulVariant::kScalar);
  CHECK(active_matmul_variant() == MatmulVariant::kScalar);
  CHECK(select_matmul_kernels("avx2", "test") == matmul_variant_for_setting("avx2"));
  CHECK(active_matmul_variant() == matmul_variant_for_setting("avx2"));
  // auto, "" and an unknown name (warned about) give the best variant.
  for (const char* best : {"auto", "", "bogus"}) {
    set_matmul_variant(MatmulVariant::kScalar);
    CHECK(select_matmul_kernels(best, "test") == best_matmul_variant());
    CHECK(active_matmul_variant() == best_matmul_variant());
  }
}

TEST_CASE("SIMD weight conversion is bit-equal to dequantize", "[kernels][simd]") {
  // All 65536 fp16 and bf16 patterns (NaNs: both NaN; hardware may quiet a signaling NaN).
  std::vector<uint8_t> halves;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    halves.push_back(static_cast<uint8_t>(h));
    halves.push_back(static_cast<uint8_t>(h >> 8));
  }
  std::mt19937 rng(7);
  const RandomWeights q8 = random_weights(TensorType::kQ8_0, 3, 96, 1, rng);
  const std::span<const uint8_t> q8_bytes(q8.w.data, q8.w.rows * q8.w.row_bytes);
  for (MatmulVariant v : supported_simd_variants()) {
    VariantGuard guard;
    set_matmul_variant(v);
    const detail::MatmulKernels& k = detail::active_matmul_kernels();
    INFO("variant " << matmul_variant_name(v));
    for (TensorType type : {TensorType::kF16, TensorType::kBF16}) {
      // Offsets and lengths that leave unaligned heads and partial vector tails.
      for (size_t skip : {size_t{0}, size_t{1}, size_t{3}}) {
        const size_t n = 0x10000 - skip - 5;
        const std::span<const uint8_t> src = std::span<const uint8_t>(halves).subspan(2 * skip);
        std::vector<float> want(n), got(n, -1.0f);
        REQUIRE(dequantize(type, src.first(2 * n), want).ok());
        REQUIRE(k.to_float(type, src.data(), n, got.data()));
        size_t mismatches = 0;
        for (size_t i = 0; i < n; ++i) {
          const bool same =
              std::isnan(want[i]) ? std::isnan(got[i]) : std::memcmp(&want[i], &got[i], 4) == 0;
          if (!same) ++mismatches;
        }
        INFO("type " << tensor_type_name(type) << " skip " << skip);
        CHECK(mismatches == 0);
      }
    }
    std::vector<float> want(3 * 96), got(3 * 96);
    REQUIRE(dequantize(TensorType::kQ8_0, q8_bytes, want).ok());
    REQUIRE(k.to_float(TensorType::kQ8_0, q8_bytes.data(), want.size(), got.data()));
    CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
    // FP8 blocks: every non-NaN code under normal, tiny and subnormal scales.
    const RandomWeights f8 = random_weights(TensorType::kF8_E4M3_B128, 6, 512, 3, rng);
    const std::span<const uint8_t> f8_bytes(f8.w.data, f8.w.rows * f8.w.row_bytes);
    std::vector<float> f8_want(6 * 512), f8_got(6 * 512);
    REQUIRE(dequantize(TensorType::kF8_E4M3_B128, f8_bytes, f8_want).ok());
    REQUIRE(k.to_float(TensorType::kF8_E4M3_B128, f8_bytes.data(), f8_want.size(), f8_got.data()));
    CHECK(std::memcmp(f8_want.data(), f8_got.data(), f8_want.size() * sizeof(float)) == 0);
    // Types without a SIMD conversion are left to dequantize().
    CHECK_FALSE(k.to_float(TensorType::kQ4_K, q8_bytes.data(), 256, got.data()));
  }
}

TEST_CASE("SIMD Q8_0 int8 path is bit-identical to the scalar reference", "[kernels][simd]") {
  VariantGuard guard;
  std::mt19937 rng(11);
  for (const size_t cols : {size_t{32}, size_t{96}, size_t{256}, size_t{2048}}) {
    for (const size_t n_tokens : {size_t{1}, size_t{2}, size_t{7}, size_t{33}}) {
      if (cols == 2048 && n_tokens == 33) continue;  // keep the test quick
      const size_t rows = cols == 2048 ? 45 : 77;    // not a multiple of the row groups
      const RandomWeights rw = random_weights(TensorType::kQ8_0, rows, cols, cols % 3, rng);
      std::vector<float> x = random_floats(n_tokens * cols, rng);
      x[0] = 1e30f;  // one block quantizes to +-127 extremes
      QuantizedActivations xq;
      quantize_activations(ActivationFormat::kQ8_0, x, n_tokens, cols, xq);
      set_matmul_variant(MatmulVariant::kScalar);
      std::vector<float> want(n_tokens * rows, NAN);
      q8_0_rows(rw.w, xq, want, 0, rows);
      for (MatmulVariant v : supported_simd_variants()) {
        set_matmul_variant(v);
        INFO("variant " << matmul_variant_name(v) << " cols " << cols << " tokens " << n_tokens);
        std::vector<float> got(want.size(), NAN);
        q8_0_rows(rw.w, xq, got, 0, rows);
        CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
        // A partial row range writes exactly its rows, with the same values.
        const size_t r0 = 3, r1 = rows - 5;
        std::vector<float> part(want.size(), NAN);
        q8_0_rows(rw.w, xq, part, r0, r1);
        size_t bad = 0;
        for (size_t t = 0; t < n_tokens; ++t) {
          for (size_t r = 0; r < rows; ++r) {
            const float p = part[t * rows + r];
            const bool inside = r >= r0 && r < r1;
            if (inside ? std::memcmp(&p, &want[t * rows + r], 4) != 0 : !std::isnan(p)) ++bad;
          }
        }
        CHECK(bad == 0);
        // The last token alone (rows read in place for 1-2 tokens) equals its row of the batch
        // (unpacked tiles from 3 tokens on).
        QuantizedActivations last;
        quantize_activations(ActivationFormat::kQ8_0,
                             std::span<const float>(x).subspan((n_tokens - 1) * cols), 1, cols,
                             last);
        std::vector<float> one(rows, NAN);
        q8_0_rows(rw.w, last, one, 0, rows);
        CHECK(std::memcmp(one.data(), got.data() + (n_tokens - 1) * rows, rows * sizeof(float)) ==
              0);
      }
    }
  }
}

// Float path: the SIMD variants sum in another order than the scalar reference. Each result is
// within (chain length + reduction levels) * 2^-24 * sum |x w| of the exact value (scalar: cols/8
// + 3, SIMD: cols/16 + 5), so the two differ by at most (cols/4 + 16) * 2^-24 * sum |x w|: for the
// gate shape (cols 768) that is 1.2e-5 of sum |x w|.
TEST_CASE("SIMD float path matches the scalar reference for every weight type", "[kernels][simd]") {
  VariantGuard guard;
  std::mt19937 rng(5);
  const std::vector<TensorType> types = {TensorType::kF32, TensorType::kF16, TensorType::kBF16,
                                         TensorType::kQ8_0, TensorType::kF8_E4M3_B128};
  for (TensorType type : types) {
    for (const size_t cols : {size_t{1}, size_t{13}, size_t{32}, size_t{100}, size_t{128},
                              size_t{160}, size_t{777}, size_t{2048}}) {
      const size_t block = tensor_type_traits(type)->block_elements;
      if (cols % block != 0) continue;
      for (const size_t n_tokens : {size_t{1}, size_t{2}, size_t{7}, size_t{33}}) {
        const size_t rows = cols >= 777 ? 11 : 37;
        for (const size_t misalign : {size_t{0}, size_t{1}}) {
          const RandomWeights rw = random_weights(type, rows, cols, misalign * 4 + misalign, rng);
          const std::vector<float> x = random_floats(n_tokens * cols, rng);
          const std::vector<float> wf = weights_as_float(rw.w);
          set_matmul_variant(MatmulVariant::kScalar);
          const std::vector<float> want = run_rows(rw.w, x, n_tokens, 0, rows, 0);
          for (MatmulVariant v : supported_simd_variants()) {
            set_matmul_variant(v);
            INFO("type " << tensor_type_name(type) << " variant " << matmul_variant_name(v)
                         << " cols " << cols << " tokens " << n_tokens << " misalign " << misalign);
            const std::vector<float> got = run_rows(rw.w, x, n_tokens, 0, rows, misalign);
            size_t bad = 0;
            for (size_t t = 0; t < n_tokens; ++t) {
              for (size_t r = 0; r < rows; ++r) {
                double abs_sum = 0.0;
                for (size_t c = 0; c < cols; ++c) {
                  abs_sum += std::fabs(static_cast<double>(x[t * cols + c]) * wf[r * cols + c]);
                }
                const double tol = (static_cast<double>(cols) / 4 + 16) * kUnit * abs_sum;
                const float a = got[t * rows + r], b = want[t * rows + r];
                if (!(std::fabs(static_cast<double>(a) - b) <= tol)) ++bad;
              }
            }
            CHECK(bad == 0);
            // Row ranges (a thread pool's split) and single tokens give bit-identical elements.
            const size_t r0 = rows / 3, r1 = rows - 1;
            const std::vector<float> part = run_rows(rw.w, x, n_tokens, r0, r1, 0);
            const std::vector<float> last =
                run_rows(rw.w, std::vector<float>(x.end() - cols, x.end()), 1, 0, rows, 0);
            size_t split_bad = 0;
            for (size_t t = 0; t < n_tokens; ++t) {
              for (size_t r = 0; r < rows; ++r) {
                const float p = part[t * rows + r];
                const bool inside = r >= r0 && r < r1;
                if (inside ? std::memcmp(&p, &got[t * rows + r], 4) != 0 : !std::isnan(p)) {
                  ++split_bad;
                }
              }
            }
            for (size_t r = 0; r < rows; ++r) {
              if (std::memcmp(&last[r], &got[(n_tokens - 1) * rows + r], 4) != 0) ++split_bad;
            }
            CHECK(split_bad == 0);
          }
        }
      }
    }
  }
}

// The numpy/gguf-py fixtures of matmul_test.cpp, under every supported variant: an external
// reference for the SIMD kernels (and the scalar-dequantize fallback, through Q4_K).
TEST_CASE("every variant matches the numpy fixtures", "[kernels][simd]") {
  VariantGuard guard;
  const std::vector<std::pair<std::string, TensorType>> types = {{"f32", TensorType::kF32},
                                                                 {"f16", TensorType::kF16},
                                                                 {"bf16", TensorType::kBF16},
                                                                 {"q8_0", TensorType::kQ8_0},
                                                                 {"q4_k", TensorType::kQ4_K}};
  for (MatmulVariant v : supported_simd_variants()) {
    set_matmul_variant(v);
    for (const auto& [name, type] : types) {
      INFO("variant " << matmul_variant_name(v) << " type " << name);
      const testing::KernelFixture fx("matmul_" + name);
      const size_t rows = fx.params().at("rows").get<size_t>();
      const size_t cols = fx.params().at("cols").get<size_t>();
      const size_t n_tokens = fx.params().at("n_tokens").get<size_t>();
      const std::vector<uint8_t> w_bytes = fx.array<uint8_t>("w");
      const std::vector<float> x = fx.array<float>("x");
      Result<WeightMatrix> w = make_weight_matrix(type, w_bytes, rows, cols);
      REQUIRE(w.ok());
      std::vector<float> y(n_tokens * rows, NAN);
      matmul(*w, x, n_tokens, y);
      const std::vector<double> want = fx.array<double>("y");
      const std::vector<double> abs_y = fx.array<double>("abs_y");
      size_t bad = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        if (!(std::fabs(y[i] - want[i]) <= static_cast<double>(cols) * kUnit * abs_y[i] + 1e-30)) {
          ++bad;
        }
      }
      CHECK(bad == 0);
      if (type == TensorType::kQ8_0) {
        matmul(*w, x, n_tokens, y, MatmulActivations::kQuantized);
        const std::vector<double> want_q = fx.array<double>("y_q8_0");
        const std::vector<double> abs_q = fx.array<double>("abs_y_q8_0");
        const double blocks = static_cast<double>(cols / kQ8_0BlockElements);
        size_t bad_q = 0;
        for (size_t i = 0; i < y.size(); ++i) {
          if (!(std::fabs(y[i] - want_q[i]) <= (blocks + 2) * kUnit * abs_q[i] + 1e-30)) ++bad_q;
        }
        CHECK(bad_q == 0);
      }
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
