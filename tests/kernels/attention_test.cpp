// Tests of causal grouped-query attention against a numpy float64 reference.
#include "kernels/cpu/attention.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "tests/kernels/kernel_fixture.h"

namespace tandem::kernels {
namespace {

using testing::KernelFixture;

TEST_CASE("attention matches numpy causal GQA", "[kernels]") {
  for (const std::string name : {"attention_prefill", "attention_chunk", "attention_decode"}) {
    SECTION(name) {
      const KernelFixture fx(name);
      const auto& p = fx.params();
      AttentionConfig config;
      config.n_heads = p.at("n_heads").get<size_t>();
      config.n_kv_heads = p.at("n_kv_heads").get<size_t>();
      config.head_dim = p.at("head_dim").get<size_t>();
      config.scale = 1.0f / std::sqrt(static_cast<float>(config.head_dim));
      const size_t start_pos = p.at("start_pos").get<size_t>();
      const size_t n_q = p.at("n_q").get<size_t>();
      const std::vector<float> q = fx.array<float>("q");
      const std::vector<float> k = fx.array<float>("k");
      const std::vector<float> v = fx.array<float>("v");
      const std::vector<double> want = fx.array<double>("out");
      std::vector<float> out(q.size(), NAN);
      attention(q, n_q, start_pos, k, v, config, out);
      // q, k, v lie in [-1, 1] and head_dim <= 64: a score's float dot error is typically
      // ~sqrt(64) * 2^-24 * |s| < 1e-6 and the weighted sum of |v| <= 1 adds a few ulps, so
      // outputs land within ~1e-6; 1e-5 is a 10x margin. An off-by-one causal limit pulls in the
      // 1e4 values planted past the last position; a wrong kv head is off by ~0.1.
      for (size_t i = 0; i < out.size(); ++i) {
        INFO("element " << i);
        CHECK(std::fabs(out[i] - want[i]) <= 1e-5);
      }
      // Split over heads (as a pool would): bit-equal.
      std::vector<float> split(q.size(), NAN);
      const size_t mid = config.n_heads / 2;
      attention_heads(q, n_q, start_pos, k, v, config, split, mid, config.n_heads);
      attention_heads(q, n_q, start_pos, k, v, config, split, 0, mid);
      CHECK(split == out);
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
