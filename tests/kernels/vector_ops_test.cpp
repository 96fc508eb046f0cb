// Tests of softmax, sigmoid, silu_mul, add/scale/add_scaled and top_k against numpy references.
#include "kernels/cpu/vector_ops.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/top_k.h"
#include "tests/kernels/kernel_fixture.h"

namespace tandem::kernels {
namespace {

using testing::KernelFixture;

// sigmoid/silu are a handful of float roundings on top of exp_rows.h's < 1 ulp exp: within
// 8 * 2^-24 ~ 5e-7 relative; 1e-6 relative is the bound checked. softmax also rounds x - max,
// an absolute error of |x - max| * 2^-24 that exp turns into as much relative error: its
// tolerance adds that term (for the row here |x - max| reaches ~25).
void check_rel(const std::vector<float>& got, const std::vector<double>& want,
               const std::vector<float>& extra_rel = {}) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double rel = 1e-6 + (extra_rel.empty() ? 0.0 : extra_rel[i]);
    INFO("element " << i << " got " << got[i] << " want " << want[i]);
    CHECK(std::fabs(got[i] - want[i]) <= rel * std::fabs(want[i]) + 1e-37);
  }
}

TEST_CASE("softmax, sigmoid and silu_mul match numpy", "[kernels]") {
  const KernelFixture fx("vector_ops");
  const std::vector<float> x = fx.array<float>("x");
  std::vector<float> s = x;
  softmax(s);
  const float max = *std::max_element(x.begin(), x.end());
  std::vector<float> extra(x.size());
  for (size_t i = 0; i < x.size(); ++i) extra[i] = (max - x[i]) / 16777216.0f;
  check_rel(s, fx.array<double>("softmax"), extra);
  std::vector<float> sig(x.size());
  sigmoid(x, sig);
  check_rel(sig, fx.array<double>("sigmoid"));
  const std::vector<float> gate = fx.array<float>("gate");
  const std::vector<float> up = fx.array<float>("up");
  std::vector<float> h(gate.size());
  silu_mul(gate, up, h);
  check_rel(h, fx.array<double>("silu_mul"));
}

TEST_CASE("softmax is stable for large logits", "[kernels]") {
  std::vector<float> row = {1000.0f, 1000.0f, -1000.0f, 999.0f};
  softmax(row);
  const double e = std::exp(-1.0);
  CHECK(row[0] == Approx(1.0 / (2.0 + e)).epsilon(1e-6));
  CHECK(row[1] == row[0]);
  CHECK(row[2] == 0.0f);
  CHECK(row[3] == Approx(e / (2.0 + e)).epsilon(1e-6));
}

TEST_CASE("add, scale and add_scaled", "[kernels]") {
  std::vector<float> a = {1.0f, -2.0f, 0.5f};
  const std::vector<float> b = {0.25f, 4.0f, -0.5f};
  std::vector<float> sum(3);
  add(a, b, sum);
  CHECK(sum == std::vector<float>{1.25f, 2.0f, 0.0f});
  scale(a, -2.0f);
  CHECK(a == std::vector<float>{-2.0f, 4.0f, -1.0f});
  add_scaled(a, b, 0.5f);
  CHECK(a == std::vector<float>{-1.875f, 6.0f, -1.25f});
}

TEST_CASE("top_k matches numpy's stable argsort, ties to the lower index", "[kernels]") {
  const KernelFixture fx("top_k");
  const std::vector<float> values = fx.array<float>("values");
  const std::vector<int32_t> want = fx.array<int32_t>("indices");
  std::vector<int32_t> idx(want.size(), -1);
  std::vector<float> vals(want.size());
  top_k(values, idx, vals);
  CHECK(idx == want);
  for (size_t i = 0; i < idx.size(); ++i) CHECK(vals[i] == values[static_cast<size_t>(idx[i])]);
}

TEST_CASE("top_k edge cases", "[kernels]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> values = {nan, -inf, 2.0f, 2.0f, nan, 5.0f};
  std::vector<int32_t> idx(6);
  std::vector<float> vals(6);
  top_k(values, idx, vals);  // k == n: a full ranking, NaNs last
  CHECK(idx == std::vector<int32_t>{5, 2, 3, 1, 0, 4});
  std::vector<int32_t> one(1);
  std::vector<float> one_val(1);
  top_k(values, one, one_val);
  CHECK(one[0] == 5);
  CHECK(one_val[0] == 5.0f);
  top_k(values, std::span<int32_t>(), std::span<float>());  // k = 0 writes nothing
}

}  // namespace
TEST_CASE("swiglu_oai_mul clamps gate above, up both sides, and adds 1 to up", "[kernels]") {
  // GPT-OSS's expert activation (HF GptOssExperts, llama.cpp swiglu_oai), evaluated in double.
  const std::vector<float> gate = {-9.0f, -1.5f, 0.0f, 0.3f, 6.9f, 7.0f, 12.0f, 100.0f};
  const std::vector<float> up = {-20.0f, -7.5f, -0.4f, 0.0f, 2.0f, 6.99f, 7.5f, -8.0f};
  std::vector<float> out(gate.size());
  swiglu_oai_mul(gate, up, out);
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = std::min(static_cast<double>(gate[i]), 7.0);
    const double u = std::clamp(static_cast<double>(up[i]), -7.0, 7.0);
    const double want = g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0);
    CHECK(out[i] == Approx(want).epsilon(1e-6).margin(1e-7));
  }
  // Clamping: gate 12 and 100 act as 7, up 7.5 as 7 and -8 as -7.
  CHECK(out[6] == Approx(7.0 / (1.0 + std::exp(-1.702 * 7.0)) * 8.0).epsilon(1e-6));
  CHECK(out[7] == Approx(7.0 / (1.0 + std::exp(-1.702 * 7.0)) * -6.0).epsilon(1e-6));
}

}  // namespace tandem::kernels
