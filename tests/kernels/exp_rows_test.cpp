// Tests of the exp row kernels (exp_rows.h): the exp against std::exp in double, and the AVX2 and
// AVX-512 variants of exp, softmax, sigmoid, silu_mul and swiglu_oai against the scalar references'
// bits.
#include "kernels/cpu/exp_rows.h"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/vector_ops.h"

namespace tandem::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// |got - want| in units of the last place of the float nearest want (subnormal spacing 2^-149
// below the normal range).
double ulp_error(float got, double want) {
  int e = 0;
  std::frexp(static_cast<float>(want), &e);
  const double ulp = std::max(std::ldexp(1.0, e - 24), std::ldexp(1.0, -149));
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

// Same bits, or both NaN.
bool same(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) ||
         (std::isnan(a) && std::isnan(b));
}

bool same(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!same(a[i], b[i])) return false;
  }
  return true;
}

TEST_CASE("the exp row kernels' exp is within 1 ulp of exp over [-104, 88]", "[kernels]") {
  // Checked here on every 1999th float of the range (~1.1M values, each ending of the mantissa);
  // over all ~2.24e9 floats of [-104, 88] the worst error measured was 0.951 ulp.
  std::vector<float> x;
  for (uint32_t b = 0; b <= std::bit_cast<uint32_t>(88.0f); b += 1999) {
    x.push_back(std::bit_cast<float>(b));
    x.push_back(-std::bit_cast<float>(b));
  }
  for (uint32_t b = std::bit_cast<uint32_t>(88.0f); b <= std::bit_cast<uint32_t>(104.0f);
       b += 1999) {
    x.push_back(-std::bit_cast<float>(b));
  }
  x.insert(x.end(), {88.0f, 88.72f, -87.33f, -87.34f, -103.2f, -103.28f, -103.97f, -104.0f,
                     0.5f * std::log(2.0f), -0.5f * std::log(2.0f)});
  std::vector<float> y(x.size());
  detail::exp_row_scalar(x.data(), x.size(), y.data());
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double err = ulp_error(y[i], std::exp(static_cast<double>(x[i])));
    INFO("x " << x[i] << " got " << y[i]);
    CHECK(err < 1.0);
    worst = std::max(worst, err);
  }
  CHECK(worst > 0.5);  // the samples do reach the rounding error (a broken reference would not)
}

TEST_CASE("the exp row kernels' exp at the ends of its range", "[kernels]") {
  const std::vector<float> x = {-kInf,  -1e30f, -104.0f, -103.5f, 0.0f, -0.0f,
                                88.72f, 88.73f, 89.0f,   1e30f,   kInf, std::nanf("")};
  std::vector<float> y(x.size());
  detail::exp_row_scalar(x.data(), x.size(), y.data());
  CHECK(same(y[0], 0.0f));  // +0, not -0
  CHECK(same(y[1], 0.0f));
  CHECK(same(y[2], 0.0f));                // e^-104 < 2^-150: rounds to 0
  CHECK(y[3] == std::ldexp(1.0f, -149));  // e^-103.5 = 0.80 * 2^-149
  CHECK(y[4] == 1.0f);
  CHECK(y[5] == 1.0f);
  CHECK(y[6] == Approx(std::exp(static_cast<double>(x[6]))).epsilon(1.2e-7));
  CHECK(y[7] == kInf);  // e^88.73 > FLT_MAX
  CHECK(y[8] == kInf);
  CHECK(y[9] == kInf);
  CHECK(y[10] == kInf);
  CHECK(std::isnan(y[11]));
}

// Rows of every shape the variants block differently: lengths 1..100, 1000 and 4097, with random
// logits, masked (-inf) entries, huge negative ones, equal values, and all masked.
std::vector<std::vector<float>> test_rows() {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<size_t> lengths;
  for (size_t n = 1; n <= 100; ++n) lengths.push_back(n);
  lengths.push_back(1000);
  lengths.push_back(4097);
  std::vector<std::vector<float>> rows;
  for (const size_t n : lengths) {
    for (int kind = 0; kind < 5; ++kind) {
      std::vector<float> r(n);
      for (size_t i = 0; i < n; ++i) {
        float v = normal(rng);
        if (kind == 1 && i % 3 == 1) v = -kInf;        // masked positions
        if (kind == 2 && i % 4 == 0) v = -1e30f;       // huge negative
        if (kind == 3) v = 0.75f;                      // all equal
        if (kind == 4) v = i + 1 == n ? 3.0f : -kInf;  // one unmasked entry
        if (kind == 0 && i % 7 == 0) v *= 25.0f;       // exps that underflow
        r[i] = v;
      }
      rows.push_back(r);
    }
  }
  rows.push_back(std::vector<float>(37, -kInf));  // all masked: NaN without a sink
  return rows;
}

using RowFn = void (*)(const float*, size_t, float*);
using SoftmaxFn = void (*)(float*, size_t, const float*);
using SiluFn = void (*)(const float*, const float*, size_t, float*);
using SwiGluOaiFn = void (*)(const float*, const float*, size_t, float, float, float*);

// The variant's results on test_rows() equal the scalar references' bits. (softmax's double
// partial sums of float exps are mostly exact, so a different summation order would rarely show in
// the outputs: the order is the same by construction, see exp_rows.h; what this catches is any
// difference in the exps, the tails, the max and the scaling.)
void check_variant(const std::string& name, RowFn exp_row, SoftmaxFn softmax_fn, RowFn sigmoid_fn,
                   SiluFn silu_fn, SwiGluOaiFn swiglu_fn) {
  INFO("variant " << name);
  const float sink = 1.5f;
  for (const std::vector<float>& row : test_rows()) {
    INFO("length " << row.size() << " first " << row[0]);
    const size_t n = row.size();
    for (const float* s : {static_cast<const float*>(nullptr), &sink}) {
      std::vector<float> want = row, got = row;
      detail::softmax_scalar(want.data(), n, s);
      softmax_fn(got.data(), n, s);
      CHECK(same(want, got));
    }
    // The other kernels on the row as plain values (and on 10x it, for large magnitudes), with
    // out == in, and with out a separate buffer whose neighbours must stay untouched.
    for (const float f : {1.0f, 10.0f}) {
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = f * row[i];
      std::vector<float> up(n);
      for (size_t i = 0; i < n; ++i) up[i] = 0.5f - row[(i * 7) % n] / 8.0f;
      std::vector<float> want(n), got(n + 1, 42.0f);
      detail::exp_row_scalar(x.data(), n, want.data());
      exp_row(x.data(), n, got.data());
      CHECK(got[n] == 42.0f);
      got.pop_back();
      CHECK(same(want, got));
      detail::sigmoid_scalar(x.data(), n, want.data());
      got = x;
      sigmoid_fn(got.data(), n, got.data());
      CHECK(same(want, got));
      detail::silu_mul_scalar(x.data(), up.data(), n, want.data());
      got = x;
      silu_fn(got.data(), up.data(), n, got.data());
      CHECK(same(want, got));
      // GPT-OSS's constants; the 10x rows and up * 20 cross both clamps (and NaN-free infinities).
      for (float& u : up) u *= 20.0f;
      detail::swiglu_oai_scalar(x.data(), up.data(), n, 1.702f, 7.0f, want.data());
      got = x;
      swiglu_fn(got.data(), up.data(), n, 1.702f, 7.0f, got.data());
      CHECK(same(want, got));
    }
  }
}

TEST_CASE("the AVX2 and AVX-512 exp row kernels give the scalar ones' bits", "[kernels]") {
#if defined(__x86_64__) || defined(_M_X64)
  const CpuFeatures& f = cpu_features();
  if (!(f.avx2 && f.fma)) {
    WARN("exp row kernels' AVX2 and AVX-512 variants skipped: no AVX2 and FMA on this CPU");
    return;
  }
  check_variant("avx2", detail::exp_row_avx2, detail::softmax_avx2, detail::sigmoid_avx2,
                detail::silu_mul_avx2, detail::swiglu_oai_avx2);
  if (!f.avx512f) {
    WARN("exp row kernels' AVX-512 variant skipped: no AVX-512 on this CPU");
    return;
  }
  check_variant("avx512", detail::exp_row_avx512, detail::softmax_avx512, detail::sigmoid_avx512,
                detail::silu_mul_avx512, detail::swiglu_oai_avx512);
#else
  WARN("exp row kernels' AVX2 and AVX-512 variants skipped: not an x86-64 build");
#endif
}

TEST_CASE("softmax with a sink", "[kernels]") {
  // The sink joins the max and the denominator, not the output (HF GPT-OSS: softmax over the
  // logits and the sink, then the sink's column dropped), against a double evaluation.
  const std::vector<float> logits = {0.5f, -1.0f, 2.0f, -kInf, 1.25f};
  for (const float sink : {-3.0f, 0.0f, 4.0f, 40.0f}) {
    std::vector<float> row = logits;
    softmax(row, sink);
    double m = sink;
    for (const float v : logits) m = std::max(m, static_cast<double>(v));
    double denom = std::exp(sink - m);
    for (const float v : logits) denom += std::exp(v - m);
    for (size_t i = 0; i < row.size(); ++i) {
      INFO("sink " << sink << " element " << i);
      CHECK(row[i] == Approx(std::exp(logits[i] - m) / denom).epsilon(1e-6).margin(1e-30));
    }
  }
  std::vector<float> masked(5, -kInf);
  softmax(masked, 0.0f);  // all masked: the sink takes all the weight
  for (const float v : masked) CHECK(same(v, 0.0f));
}

}  // namespace
}  // namespace tandem::kernels
