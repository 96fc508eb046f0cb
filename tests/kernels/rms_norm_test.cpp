// Tests of rms_norm and rms_norm_heads against numpy float64 references.
#include "kernels/cpu/rms_norm.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "tests/kernels/kernel_fixture.h"

namespace tandem::kernels {
namespace {

using testing::KernelFixture;

// The sum of squares is accumulated in double (error negligible); then mean -> float, + eps,
// sqrt, reciprocal, x * scale and * weight each round once: <= 6 float roundings, 6 * 2^-24 =
// 3.6e-7 relative. 1e-6 relative leaves margin and still catches a wrong mean or eps (a head
// scaled by 1e-3 makes eps = 1e-6 matter at the 1e-0 level).
void check_close(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(std::fabs(got[i] - want[i]) <= 1e-6 * std::fabs(want[i]) + 1e-30);
  }
}

TEST_CASE("rms_norm matches numpy", "[kernels]") {
  const KernelFixture fx("rms_norm");
  const size_t n_rows = fx.params().at("n_rows").get<size_t>();
  const size_t dim = fx.params().at("dim").get<size_t>();
  const float eps = fx.params().at("eps").get<float>();
  const std::vector<float> x = fx.array<float>("x");
  const std::vector<float> w = fx.array<float>("weight");
  std::vector<float> y(x.size());
  rms_norm(x, w, eps, n_rows, dim, y);
  check_close(y, fx.array<double>("y"));
  // In place gives the same bits.
  std::vector<float> in_place = x;
  rms_norm(in_place, w, eps, n_rows, dim, in_place);
  CHECK(in_place == y);
}

TEST_CASE("rms_norm_heads normalizes each head on its own", "[kernels]") {
  const KernelFixture fx("rms_norm_heads");
  const size_t n_tokens = fx.params().at("n_tokens").get<size_t>();
  const size_t n_heads = fx.params().at("n_heads").get<size_t>();
  const size_t head_dim = fx.params().at("head_dim").get<size_t>();
  const float eps = fx.params().at("eps").get<float>();
  const std::vector<float> x = fx.array<float>("x");
  const std::vector<float> w = fx.array<float>("weight");
  std::vector<float> y(x.size());
  rms_norm_heads(x, w, eps, n_tokens, n_heads, head_dim, y);
  check_close(y, fx.array<double>("y"));
}

}  // namespace
}  // namespace tandem::kernels
