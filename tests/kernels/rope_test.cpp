// Tests of RoPE (neox and normal layouts, full and partial rotation) against numpy, the layout
// equivalence under the GGUF Q/K permutation, and linear / YaRN scaling against a double-precision
// evaluation of ggml_rope_ext's formula.
#include "kernels/cpu/rope.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numbers>
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

// ggml_rope_ext's YaRN formula (ggml.c ggml_rope_yarn_corr_dims, ggml-cpu/ops.cpp rope_yarn),
// evaluated independently of the kernel in double throughout: the angle is not rounded to float.
// With yarn_round_corr_dims false the correction range is transformers' find_correction_range
// with truncate = false (modeling_rope_utils.py _compute_yarn_parameters): not rounded.
std::vector<double> rope_reference(const std::vector<float>& x, size_t n_tokens, size_t n_heads,
                                   const std::vector<int32_t>& positions, const RopeConfig& c) {
  const size_t half = c.rot_dims / 2;
  const double n_dims = static_cast<double>(c.rot_dims);
  const double base = c.freq_base;
  const auto corr_dim = [&](double beta) {
    return n_dims * std::log(static_cast<double>(c.n_ctx_orig) / (beta * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(base));
  };
  double low = 0.0, high = 0.0, mscale = c.attn_factor;
  if (c.ext_factor != 0.0f) {
    const double fast = corr_dim(c.beta_fast), slow = corr_dim(c.beta_slow);
    low = std::max(0.0, c.yarn_round_corr_dims ? std::floor(fast) : fast);
    high = std::min(n_dims - 1.0, c.yarn_round_corr_dims ? std::ceil(slow) : slow);
    mscale *= 1.0 + 0.1 * std::log(1.0 / static_cast<double>(c.freq_scale));
  }
  std::vector<double> y(x.begin(), x.end());
  for (size_t t = 0; t < n_tokens; ++t) {
    for (size_t i = 0; i < half; ++i) {
      const double theta_e = positions[t] * std::pow(base, -2.0 * i / n_dims);
      const double theta_i = c.freq_scale * theta_e;
      double theta = theta_i;
      if (c.ext_factor != 0.0f) {
        const double r = (static_cast<double>(i) - low) / std::max(0.001, high - low);
        const double mix = c.ext_factor * (1.0 - std::min(1.0, std::max(0.0, r)));
        theta = theta_i * (1.0 - mix) + theta_e * mix;
      }
      const double cs = mscale * std::cos(theta), sn = mscale * std::sin(theta);
      for (size_t h = 0; h < n_heads; ++h) {
        const size_t row = (t * n_heads + h) * c.head_dim;
        const bool neox = c.layout == RopeLayout::kNeox;
        const size_t ia = row + (neox ? i : 2 * i), ib = row + (neox ? i + half : 2 * i + 1);
        const double a = x[ia], b = x[ib];
        y[ia] = a * cs - b * sn;
        y[ib] = a * sn + b * cs;
      }
    }
  }
  return y;
}

// Runs the kernel on random inputs in [-1, 1] and compares with rope_reference. Positions stay
// <= 12, so |theta| <= 12 and the kernel's float angle (three float operations) is off by at most
// ~4 * 2^-24 * 12 = 2.9e-6 rad; times mscale * (|a| + |b|) <= 2.7 that is <= 7.7e-6, plus a few
// ulps of cos/sin rounding and rotation: 1e-5 absolute (~1e-5 relative to the outputs' scale). A
// wrong ramp direction, corr range, mscale or scaled frequency is off by >= 1e-2.
void check_against_reference(const RopeConfig& config, size_t n_heads,
                             const std::vector<int32_t>& positions, uint32_t seed) {
  const size_t n_tokens = positions.size();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n_tokens * n_heads * config.head_dim);
  for (float& v : x) v = dist(rng);
  const std::vector<double> want = rope_reference(x, n_tokens, n_heads, positions, config);
  const std::vector<float> x0 = x;
  rope(x, n_tokens, n_heads, positions, config);
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("element " << i);
    CHECK(std::fabs(x[i] - want[i]) <= 1e-5);
    if (i % config.head_dim >= config.rot_dims) CHECK(x[i] == x0[i]);
  }
}

RopeConfig gpt_oss_toy() {
  RopeConfig c;
  c.layout = RopeLayout::kNeox;
  c.head_dim = 16;
  c.rot_dims = 16;
  c.freq_base = 150000.0f;
  c.freq_scale = 1.0f / 32.0f;
  c.ext_factor = 1.0f;
  c.attn_factor = 1.0f;
  c.n_ctx_orig = 64;
  c.beta_fast = 32.0f;
  c.beta_slow = 1.0f;
  return c;
}

TEST_CASE("rope_yarn_corr_dims gives ggml's range for GPT-OSS-like numbers", "[kernels]") {
  // corr_dim(32) = 16 ln(64 / (64 pi)) / (2 ln 150000) = -0.768, corr_dim(1) = 1.558.
  const double two_ln_base = 2.0 * std::log(150000.0);
  CHECK(std::fabs(16.0 * std::log(64.0 / (32.0 * 2.0 * std::numbers::pi)) / two_ln_base - -0.768) <
        1e-3);
  CHECK(std::fabs(16.0 * std::log(64.0 / (1.0 * 2.0 * std::numbers::pi)) / two_ln_base - 1.558) <
        1e-3);
  const RopeYarnCorrDims dims = rope_yarn_corr_dims(16, 64, 150000.0f, 32.0f, 1.0f);
  CHECK(dims.low == 0.0f);   // floor(-0.768) = -1, clamped to 0
  CHECK(dims.high == 2.0f);  // ceil(1.558)
  // A long-context case: Qwen/DeepSeek style numbers, 4096 context, 128 dims, base 10000:
  // corr_dim(32) = 128 ln(4096 / (64 pi)) / (2 ln 1e4) = 20.94, corr_dim(1) = 45.03.
  const RopeYarnCorrDims wide = rope_yarn_corr_dims(128, 4096, 10000.0f, 32.0f, 1.0f);
  CHECK(wide.low == 20.0f);
  CHECK(wide.high == 46.0f);
  // The upper clamp: a huge original context pushes ceil(corr_dim(beta_slow)) past rot_dims - 1.
  const RopeYarnCorrDims clamped = rope_yarn_corr_dims(8, 1u << 30, 10.0f, 32.0f, 1.0f);
  CHECK(clamped.high == 7.0f);
}

TEST_CASE("rope_yarn_corr_dims without rounding (transformers' truncate = false)", "[kernels]") {
  // transformers' find_correction_range with truncate = false keeps the fractional range:
  // gpt-oss-20b's own numbers (head_dim 64, base 150000, original context 4096):
  // corr_dim(32) = 64 ln(4096 / (64 pi)) / (2 ln 150000) = 8.0928, corr_dim(1) = 17.3980.
  const RopeYarnCorrDims real = rope_yarn_corr_dims(64, 4096, 150000.0f, 32.0f, 1.0f, false);
  CHECK(std::fabs(real.low - 8.092779) < 1e-5);
  CHECK(std::fabs(real.high - 17.398025) < 1e-5);
  const RopeYarnCorrDims rounded = rope_yarn_corr_dims(64, 4096, 150000.0f, 32.0f, 1.0f);
  CHECK(rounded.low == 8.0f);
  CHECK(rounded.high == 18.0f);
  // The clamps still apply: corr_dim(32) = -0.768 for the toy numbers becomes 0; 1.558 stays.
  const RopeYarnCorrDims toy = rope_yarn_corr_dims(16, 64, 150000.0f, 32.0f, 1.0f, false);
  CHECK(toy.low == 0.0f);
  CHECK(std::fabs(toy.high - 1.557933) < 1e-5);
  const RopeYarnCorrDims clamped = rope_yarn_corr_dims(8, 1u << 30, 10.0f, 32.0f, 1.0f, false);
  CHECK(clamped.high == 7.0f);
}

TEST_CASE("rope with YaRN scales cos/sin by attn_factor (1 + 0.1 ln(1 / freq_scale))",
          "[kernels]") {
  // At position 0 the angle is 0, so (a, b) -> mscale (a, b): mscale = 1 + 0.1 ln 32 = 1.346574.
  RopeConfig config = gpt_oss_toy();
  std::vector<float> x(16, 0.0f);
  x[0] = 1.0f;
  x[8] = -2.0f;
  const std::vector<int32_t> zero = {0};
  rope(x, 1, 1, zero, config);
  CHECK(std::fabs(x[0] - 1.346574) < 1e-6);
  CHECK(std::fabs(x[8] - -2.0 * 1.346574) < 2e-6);
  // attn_factor multiplies on top, and alone when ext_factor == 0.
  config.attn_factor = 0.5f;
  std::vector<float> y = {1.0f, 0.0f, 0.0f, 0.0f};
  config.head_dim = config.rot_dims = 4;
  rope(y, 1, 1, zero, config);
  CHECK(std::fabs(y[0] - 0.5 * 1.346574) < 1e-6);
  config.ext_factor = 0.0f;
  y = {1.0f, 0.0f, 0.0f, 0.0f};
  rope(y, 1, 1, zero, config);
  CHECK(y[0] == 0.5f);
}

TEST_CASE("rope with YaRN matches a double-precision evaluation of ggml's formula", "[kernels]") {
  const std::vector<int32_t> positions = {0, 1, 2, 3, 5, 7, 11, 12};
  SECTION("GPT-OSS-like: rot 16, base 150000, factor 32, n_ctx_orig 64, neox") {
    check_against_reference(gpt_oss_toy(), 3, positions, 1);
  }
  SECTION("normal layout, partial rotation, wide ramp, ext_factor 0.5, attn_factor 0.8") {
    RopeConfig c;
    c.layout = RopeLayout::kNormal;
    c.head_dim = 40;
    c.rot_dims = 32;
    c.freq_base = 10000.0f;
    c.freq_scale = 0.25f;
    c.ext_factor = 0.5f;
    c.attn_factor = 0.8f;
    c.n_ctx_orig = 4096;  // corr range [5, 12] of 16 pairs: ramps over several pairs
    c.beta_fast = 32.0f;
    c.beta_slow = 1.0f;
    const RopeYarnCorrDims dims = rope_yarn_corr_dims(32, 4096, 10000.0f, 32.0f, 1.0f);
    CHECK(dims.low == 5.0f);
    CHECK(dims.high == 12.0f);
    check_against_reference(c, 2, positions, 2);
  }
  SECTION("unrounded correction range (truncate = false), fractional low and high") {
    // head 16, base 150000, original context 4096: range [2.0232, 4.3495], so pairs 2, 3 and 4
    // get a mix strictly between 0 and 1 that differs from the rounded range's [2, 5].
    RopeConfig c = gpt_oss_toy();
    c.n_ctx_orig = 4096;
    c.yarn_round_corr_dims = false;
    check_against_reference(c, 3, positions, 5);
    // The rounding matters: the same input through the rounded range differs visibly.
    std::vector<float> a(16 * 2), b;
    for (size_t i = 0; i < a.size(); ++i) a[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
    b = a;
    const std::vector<int32_t> pos = {9, 12};
    rope(a, 2, 1, pos, c);
    c.yarn_round_corr_dims = true;
    rope(b, 2, 1, pos, c);
    float diff = 0.0f;
    for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::fabs(a[i] - b[i]));
    CHECK(diff > 1e-3f);
  }
  SECTION("YaRN with freq_scale 1 is plain RoPE up to rounding") {
    RopeConfig c = gpt_oss_toy();
    c.freq_scale = 1.0f;
    check_against_reference(c, 2, positions, 3);
  }
}

TEST_CASE("linear-scaled rope (ext_factor 0, freq_scale 0.5)", "[kernels]") {
  RopeConfig c;
  c.layout = RopeLayout::kNeox;
  c.head_dim = 24;
  c.rot_dims = 20;
  c.freq_base = 10000.0f;
  c.freq_scale = 0.5f;
  const std::vector<int32_t> positions = {0, 2, 4, 6, 10, 12};
  check_against_reference(c, 2, positions, 4);
  // Halving float(pos) * inv_freq is exact, so position 2k scaled by 0.5 is bit for bit plain
  // RoPE at position k.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> scaled(positions.size() * 2 * c.head_dim);
  for (float& v : scaled) v = dist(rng);
  std::vector<float> plain = scaled;
  rope(scaled, positions.size(), 2, positions, c);
  std::vector<int32_t> halved;
  for (const int32_t p : positions) halved.push_back(p / 2);
  c.freq_scale = 1.0f;
  rope(plain, positions.size(), 2, halved, c);
  CHECK(scaled == plain);
}

TEST_CASE("rope's defaults are plain RoPE bit for bit", "[kernels]") {
  // The plain computation rope.h documents (float inv_freq from a double pow, float angle, cos/sin
  // in double rounded once, float rotation), written out here: with the scaling fields at their
  // defaults, and with YaRN-only fields set while ext_factor is 0, the kernel equals it exactly.
  const size_t head_dim = 64, n_heads = 2, half = head_dim / 2;
  const float base = 500000.0f;
  const std::vector<int32_t> positions = {1, 17, 4000, 131071};
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> want(positions.size() * n_heads * head_dim);
  for (float& v : want) v = dist(rng);
  std::vector<float> a = want, b = want;
  for (size_t t = 0; t < positions.size(); ++t) {
    for (size_t i = 0; i < half; ++i) {
      const float inv = static_cast<float>(std::pow(static_cast<double>(base), -2.0 * i / 64.0));
      const float theta = static_cast<float>(positions[t]) * inv;
      const float c = static_cast<float>(std::cos(static_cast<double>(theta)));
      const float s = static_cast<float>(std::sin(static_cast<double>(theta)));
      for (size_t h = 0; h < n_heads; ++h) {
        float* head = want.data() + (t * n_heads + h) * head_dim;
        const float a0 = head[i], b0 = head[i + half];
        head[i] = a0 * c - b0 * s;
        head[i + half] = a0 * s + b0 * c;
      }
    }
  }
  const RopeConfig plain{RopeLayout::kNeox, head_dim, head_dim, base};
  CHECK(plain.freq_scale == 1.0f);
  CHECK(plain.ext_factor == 0.0f);
  CHECK(plain.attn_factor == 1.0f);
  RopeConfig inert = plain;
  inert.n_ctx_orig = 4096;
  inert.beta_fast = 7.0f;
  inert.beta_slow = 3.0f;
  rope(a, positions.size(), n_heads, positions, plain);
  rope(b, positions.size(), n_heads, positions, inert);
  CHECK(a == want);
  CHECK(b == want);
}

}  // namespace
}  // namespace tandem::kernels
