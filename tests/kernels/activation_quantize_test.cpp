// Tests of the AVX2 activation quantizers (activation_quantize.h): byte-identical quants, scales
// (bit patterns) and sums to the scalar references, over random rows and the inputs where the
// rounding and special-value rules decide: exact halves, NaN, infinities, zero blocks, subnormal
// and huge magnitudes, and a largest magnitude reached by both signs.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/activation_quantize.h"
#include "tests/kernels/quant_dot_test_support.h"

namespace tandem::kernels {
namespace {

using testing::bits_of;

// A row of n floats for case c: random normals, then the case's special values.
std::vector<float> special_row(size_t n, int c, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<size_t> pos(0, n - 1);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  const float inf = std::numeric_limits<float>::infinity();
  switch (c % 8) {
    case 0:  // random only
      break;
    case 1:  // NaNs among finite values
      for (int i = 0; i < 5; ++i) x[pos(rng)] = std::numeric_limits<float>::quiet_NaN();
      break;
    case 2:  // an infinity
      x[pos(rng)] = (c & 8) != 0 ? -inf : inf;
      break;
    case 3:  // the first block all zero, another all -0
      for (size_t i = 0; i < n && i < 256; ++i) x[i] = 0.0f;
      for (size_t i = n / 2; i < n && i < n / 2 + 32; ++i) x[i] = -0.0f;
      break;
    case 4:  // small integers: with amax 127 (Q8_0's scale 1) halves land exactly on .5
      for (float& v : x) v = std::round(v * 40.0f) / 2.0f;
      for (size_t i = 0; i < n; i += 32) x[i] = 127.0f;
      break;
    case 5:  // subnormal and tiny magnitudes
      for (float& v : x) v *= 1e-39f;
      break;
    case 6:  // huge magnitudes
      for (float& v : x) v *= 1e37f;
      break;
    case 7:  // the largest magnitude with both signs (the first one decides Q8_K's sign)
      for (size_t i = 0; i < n; i += 64) {
        x[i + 3] = -9.0f;
        x[i + 40] = 9.0f;
      }
      break;
  }
  return x;
}

TEST_CASE("AVX2 activation quantizers are bit-identical to the scalar references",
          "[kernels][simd]") {
  if (!testing::have_avx2()) {
    WARN("AVX2 activation quantizers skipped: this CPU has no AVX2");
    return;
  }
  std::mt19937 rng(61);
  for (int c = 0; c < 48; ++c) {
    const size_t n = 256 * static_cast<size_t>(1 + c % 4);
    const std::vector<float> x = special_row(n, c, rng);
    INFO("case " << c << ", " << n << " elements");
    {
      std::vector<int8_t> q_want(n), q_got(n);
      std::vector<float> d_want(n / 32), d_got(n / 32);
      detail::quantize_row_q8_0_scalar(x.data(), n, q_want.data(), d_want.data());
      detail::quantize_row_q8_0_avx2(x.data(), n, q_got.data(), d_got.data());
      CHECK(q_got == q_want);
      size_t bad = 0;
      for (size_t i = 0; i < d_want.size(); ++i) bad += bits_of(d_got[i]) != bits_of(d_want[i]);
      CHECK(bad == 0);
    }
    {
      std::vector<int8_t> q_want(n), q_got(n);
      std::vector<float> d_want(n / 256), d_got(n / 256);
      std::vector<int16_t> s_want(n / 16), s_got(n / 16);
      detail::quantize_row_q8_k_scalar(x.data(), n, q_want.data(), d_want.data(), s_want.data());
      detail::quantize_row_q8_k_avx2(x.data(), n, q_got.data(), d_got.data(), s_got.data());
      CHECK(q_got == q_want);
      CHECK(s_got == s_want);
      size_t bad = 0;
      for (size_t i = 0; i < d_want.size(); ++i) bad += bits_of(d_got[i]) != bits_of(d_want[i]);
      CHECK(bad == 0);
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
