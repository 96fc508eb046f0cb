// Tests of token_logprobs: log-softmax against a direct double computation, the top entries'
// order and ties, and rows with non-finite logits.
#include "engine/runtime/logprobs.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace tandem::runtime {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST_CASE("token_logprobs is log softmax of the raw row, with the top entries in order",
          "[runtime][logprobs]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> logits(5000);
  for (float& x : logits) x = normal(rng);
  double z = 0.0;
  for (const float x : logits) z += std::exp(static_cast<double>(x));
  const double log_z = std::log(z);
  const TokenLogprobs lp = token_logprobs(logits, 1234, 5);
  CHECK(lp.logprob == Approx(logits[1234] - log_z).margin(1e-5));
  REQUIRE(lp.top_ids.size() == 5);
  REQUIRE(lp.top_logprobs.size() == 5);
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  for (size_t k = 0; k < 5; ++k) {
    CHECK(lp.top_ids[k] == order[k]);
    CHECK(lp.top_logprobs[k] == Approx(logits[order[k]] - log_z).margin(1e-5));
  }
  double total = 0.0;
  for (const float x : logits) total += std::exp(static_cast<double>(x) - log_z);
  CHECK(total == Approx(1.0).epsilon(1e-9));
  CHECK(token_logprobs(logits, 0, 0).top_ids.empty());
  CHECK(token_logprobs(logits, 0, kMaxTopLogprobs).top_ids.size() == 20);
}

TEST_CASE("token_logprobs breaks ties by the lower id and survives non-finite logits",
          "[runtime][logprobs]") {
  const std::vector<float> tied = {1.0f, 3.0f, 3.0f, 2.0f};
  const TokenLogprobs t = token_logprobs(tied, 0, 3);
  CHECK(t.top_ids == std::vector<int32_t>{1, 2, 3});
  CHECK(t.top_logprobs[0] == t.top_logprobs[1]);

  const std::vector<float> odd = {-kInf, std::nanf(""), 0.0f, kInf};
  const TokenLogprobs o = token_logprobs(odd, 2, 2);
  CHECK(o.logprob == 0.0f);  // the only finite logit holds all the mass
  CHECK(o.top_ids == std::vector<int32_t>{2, 0});
  CHECK(o.top_logprobs[1] == -kInf);
  CHECK(token_logprobs(odd, 1, 0).logprob == -kInf);

  const std::vector<float> none = {-kInf, -kInf};
  const TokenLogprobs n = token_logprobs(none, 1, 2);
  CHECK(n.logprob == -kInf);
  CHECK(n.top_ids == std::vector<int32_t>{0, 1});
}

}  // namespace
}  // namespace tandem::runtime
