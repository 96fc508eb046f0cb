// Tests of RoPE (neox and normal layouts, full and partial rotation) against numpy, and the
// layout equivalence under the GGUF Q/K permutation.
#include "kernels/cpu/rope.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/kernels/kernel_fixture.h"

namespace tandem::kernels {
namespace {

using testing::KernelFixture;

TEST_CASE("rope matches numpy for both layouts", "[kernels]") {
  for (const std::string name :
       {"rope_neox", "rope_normal", "rope_neox_partial", "rope_normal_partial"}) {
    SECTION(name) {
      const KernelFixture fx(name);
      const auto& p = fx.params();
      RopeConfig config;
      config.layout = p.at("layout") == "neox" ? RopeLayout::kNeox : RopeLayout::kNormal;
      config.head_dim = p.at("head_dim").get<size_t>();
      config.rot_dims = p.at("rot_dims").get<size_t>();
      config.freq_base = p.at("freq_base").get<float>();
      const size_t n_tokens = p.at("n_tokens").get<size_t>();
      const size_t n_heads = p.at("n_heads").get<size_t>();
      std::vector<float> x = fx.array<float>("x");
      const std::vector<float> x0 = x;
      const std::vector<int32_t> positions = fx.array<int32_t>("positions");
      const std::vector<double> want = fx.array<double>("y");
      rope(x, n_tokens, n_heads, positions, config);
      // The reference shares the float32 angle (see rope.h), so what is left is cos/sin rounding
      // and the rotation's float products and sum: <= 3 * 2^-24 * (|a| + |b|) <= 7.2e-7 for
      // inputs in [-2, 2]. A wrong pairing, frequency or sign is off by ~1.
      for (size_t i = 0; i < x.size(); ++i) {
        INFO("element " << i);
        CHECK(std::fabs(x[i] - want[i]) <= 1e-6);
      }
      // Dimensions past rot_dims pass through untouched.
      for (size_t i = 0; i < x.size(); ++i) {
        if (i % config.head_dim >= config.rot_dims) CHECK(x[i] == x0[i]);
      }
    }
  }
}

TEST_CASE("neox rope of a permuted head equals normal rope, permuted", "[kernels]") {
  // GGUF's converter permutes llama Q/K rows so that pair (i, i + d/2) of HF's layout becomes
  // (2i, 2i + 1): with P mapping normal index 2i -> i and 2i + 1 -> i + d/2,
  // rope_neox(P v) == P rope_normal(v), bit for bit (the same float operations).
  const size_t head_dim = 128, n_heads = 2, n_tokens = 3, half = head_dim / 2;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> normal(n_tokens * n_heads * head_dim);
  for (float& v : normal) v = dist(rng);
  std::vector<float> neox(normal.size());
  for (size_t row = 0; row < n_tokens * n_heads; ++row) {
    for (size_t i = 0; i < half; ++i) {
      neox[row * head_dim + i] = normal[row * head_dim + 2 * i];
      neox[row * head_dim + i + half] = normal[row * head_dim + 2 * i + 1];
    }
  }
  const std::vector<int32_t> positions = {3, 500, 70000};
  RopeConfig config{RopeLayout::kNormal, head_dim, head_dim, 1000000.0f};
  rope(normal, n_tokens, n_heads, positions, config);
  config.layout = RopeLayout::kNeox;
  rope(neox, n_tokens, n_heads, positions, config);
  for (size_t row = 0; row < n_tokens * n_heads; ++row) {
    for (size_t i = 0; i < half; ++i) {
      REQUIRE(neox[row * head_dim + i] == normal[row * head_dim + 2 * i]);
      REQUIRE(neox[row * head_dim + i + half] == normal[row * head_dim + 2 * i + 1]);
    }
  }
}

TEST_CASE("rope at position 0 is the identity", "[kernels]") {
  std::vector<float> x = {1.5f, -2.0f, 0.25f, 3.0f, 7.0f, -1.0f};
  const std::vector<float> x0 = x;
  const std::vector<int32_t> positions = {0};
  rope(x, 1, 1, positions, RopeConfig{RopeLayout::kNeox, 6, 4, 10000.0f});
  CHECK(x == x0);
}

}  // namespace
}  // namespace tandem::kernels
