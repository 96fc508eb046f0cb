// Tests for the sampler: HF-warper fixtures, penalties, greedy ties, seeds, draw statistics, and
// SamplingParams::validate.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/runtime/sampler.h"
#include "engine/runtime/sampling_params.h"

namespace tandem::runtime {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

nlohmann::json load_fixture() {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/sampler/hf_filters.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

std::vector<int32_t> unique_ids(const std::vector<int32_t>& ids) {
  std::vector<int32_t> out;
  for (int32_t id : ids) {
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  }
  return out;
}

TEST_CASE("filters reproduce HF transformers' logits warpers", "[sampler]") {
  const nlohmann::json doc = load_fixture();
  std::vector<int32_t> scratch;
  int cases = 0;
  for (const auto& row : doc["rows"]) {
    const auto base = row["logits"].get<std::vector<float>>();
    const auto history = unique_ids(row["history"].get<std::vector<int32_t>>());
    for (const auto& c : row["cases"]) {
      INFO("row " << row["name"].get<std::string>() << " case " << c["name"].get<std::string>());
      std::vector<float> logits = base;
      for (const auto& step : c["steps"]) {
        const std::string op = step["op"];
        const double value = step["value"];
        if (op == "temperature") {
          apply_temperature(logits, static_cast<float>(value));
        } else if (op == "top_k") {
          apply_top_k(logits, static_cast<int64_t>(value), scratch);
        } else if (op == "top_p") {
          apply_top_p(logits, static_cast<float>(value), scratch);
        } else if (op == "min_p") {
          apply_min_p(logits, static_cast<float>(value));
        } else if (op == "repetition_penalty") {
          apply_repetition_penalty(logits, history, static_cast<float>(value));
        } else {
          FAIL("unknown op " << op);
        }
      }
      std::vector<int32_t> kept;
      for (size_t i = 0; i < logits.size(); ++i) {
        if (std::isfinite(logits[i])) kept.push_back(static_cast<int32_t>(i));
      }
      REQUIRE(kept == c["kept"].get<std::vector<int32_t>>());
      std::vector<double> probs(logits.size());
      REQUIRE(softmax(logits, probs));
      const auto expected_logits = c["kept_logits"].get<std::vector<double>>();
      const auto expected_probs = c["kept_probs"].get<std::vector<double>>();
      for (size_t j = 0; j < kept.size(); ++j) {
        CHECK(logits[kept[j]] == Approx(expected_logits[j]).margin(1e-5).epsilon(1e-6));
        CHECK(std::abs(probs[kept[j]] - expected_probs[j]) < 1e-6);
      }
      ++cases;
    }
  }
  CHECK(cases == 39);
}

// Naive references for the large-vocabulary paths: a full sort.
std::vector<int32_t> sorted_desc(const std::vector<float>& logits) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  return ids;
}

TEST_CASE("top-k and top-p on a 150k vocabulary match a full sort", "[sampler]") {
  std::mt19937_64 rng(123);
  std::vector<float> base(150000);
  for (float& l : base) l = static_cast<float>(uniform_from_bits(rng()) * 20.0 - 10.0);
  const auto order = sorted_desc(base);
  std::vector<int32_t> scratch;

  for (int64_t k : {1, 50, 4000}) {
    std::vector<float> logits = base;
    apply_top_k(logits, k, scratch);
    std::vector<int32_t> kept;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (std::isfinite(logits[i])) kept.push_back(static_cast<int32_t>(i));
    }
    std::vector<int32_t> expected(order.begin(), order.begin() + k);
    std::sort(expected.begin(), expected.end());
    CHECK(kept == expected);
  }

  for (float p : {0.001f, 0.3f, 0.95f}) {
    std::vector<float> logits = base;
    apply_top_p(logits, p, scratch);
    std::vector<double> probs(base.size());
    REQUIRE(softmax(base, probs));
    double above = 0.0;
    size_t keep = 0;
    while (keep < order.size() && above < p) above += probs[order[keep++]];
    std::vector<int32_t> expected(order.begin(), order.begin() + static_cast<long>(keep));
    std::sort(expected.begin(), expected.end());
    std::vector<int32_t> kept;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (std::isfinite(logits[i])) kept.push_back(static_cast<int32_t>(i));
    }
    INFO("top_p " << p);
    CHECK(kept == expected);
  }
}

TEST_CASE("every filter keeps at least the best token", "[sampler]") {
  std::vector<int32_t> scratch;
  std::vector<float> logits = {0.0f, 50.0f, -kInf, 1.0f};
  apply_top_p(logits, 1e-9f, scratch);
  apply_min_p(logits, 1.0f);
  apply_top_k(logits, 1, scratch);
  CHECK(argmax(logits) == 1);
  CHECK(std::isfinite(logits[1]));
  CHECK(logits[0] == -kInf);
  CHECK(logits[3] == -kInf);
}

TEST_CASE("greedy picks the lowest id among tied maxima", "[sampler]") {
  CHECK(argmax(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f}) == 1);
  CHECK(argmax(std::vector<float>{-kInf, -kInf}) == -1);
  SamplingParams params;
  params.temperature = 0.0f;
  Sampler sampler(params, 5, {}, {});
  const std::vector<float> row = {0.5f, 2.0f, -1.0f, 2.0f, 2.0f};
  for (int i = 0; i < 3; ++i) {
    auto token = sampler.sample(row);
    REQUIRE(token.ok());
    CHECK(*token == 1);
  }
  CHECK(sampler.output_count() == 3);
}

TEST_CASE("presence and frequency penalties follow the OpenAI formula", "[sampler]") {
  // logit -= count * frequency + (count > 0) * presence
  std::vector<float> logits = {1.0f, 2.0f, 1.0f, 0.0f, 4.0f, -1.0f};
  const std::vector<TokenCount> counts = {{2, 3}, {5, 1}};
  apply_presence_frequency_penalty(logits, counts, 0.5f, 0.25f);
  CHECK(logits[2] == Approx(1.0 - 3 * 0.25 - 0.5));   // -0.25
  CHECK(logits[5] == Approx(-1.0 - 1 * 0.25 - 0.5));  // -1.75
  CHECK(logits[0] == 1.0f);
  CHECK(logits[4] == 4.0f);

  // Through the sampler: token 0 produced three times, then 2.0 - 3 * f against 1.5.
  const std::vector<float> row = {2.0f, 1.5f};
  for (auto [frequency, expected] : {std::pair{0.2f, 1}, std::pair{0.1f, 0}}) {
    SamplingParams params;
    params.temperature = 0.0f;
    params.frequency_penalty = frequency;
    Sampler sampler(params, 2, {}, {});
    for (int i = 0; i < 3; ++i) sampler.record_output(0);
    auto token = sampler.sample(row);
    REQUIRE(token.ok());
    CHECK(*token == expected);
  }
  // Presence counts once however often the token appeared: 2.0 - 0.4 = 1.6 > 1.5.
  SamplingParams params;
  params.temperature = 0.0f;
  params.presence_penalty = 0.4f;
  Sampler sampler(params, 2, {}, {});
  for (int i = 0; i < 5; ++i) sampler.record_output(0);
  CHECK(*sampler.sample(row) == 0);
  // Prompt tokens do not count for presence/frequency.
  Sampler prompt_only(params, 2, std::vector<int32_t>{0, 0, 0}, {});
  CHECK(*prompt_only.sample(std::vector<float>{1.55f, 1.5f}) == 0);
}

TEST_CASE("repetition penalty covers prompt and output, dividing or multiplying by sign",
          "[sampler]") {
  SamplingParams params;
  params.temperature = 0.0f;
  params.repetition_penalty = 1.5f;
  Sampler positive(params, 2, std::vector<int32_t>{0}, {});
  CHECK(*positive.sample(std::vector<float>{2.0f, 1.5f}) == 1);  // 2 / 1.5 = 1.33 < 1.5
  Sampler negative(params, 2, std::vector<int32_t>{0}, {});
  CHECK(*negative.sample(std::vector<float>{-1.0f, -1.2f}) == 1);  // -1 * 1.5 < -1.2
  Sampler from_output(params, 2, {}, {});
  CHECK(*from_output.sample(std::vector<float>{2.0f, 1.5f}) == 0);
  CHECK(*from_output.sample(std::vector<float>{2.0f, 1.5f}) == 1);  // 0 is now in the history
}

TEST_CASE("logit bias is added before selection", "[sampler]") {
  SamplingParams params;
  params.temperature = 0.0f;
  params.logit_bias = {{2, 5.0f}, {0, -100.0f}};
  Sampler sampler(params, 3, {}, {});
  CHECK(*sampler.sample(std::vector<float>{10.0f, 1.0f, 0.0f}) == 2);
}

TEST_CASE("min_tokens masks EOS and stop ids until reached", "[sampler]") {
  const std::vector<float> row = {5.0f, 4.0f, 1.0f};  // 0 is EOS, 1 a stop id
  SamplingParams params;
  params.temperature = 0.0f;
  params.min_tokens = 2;
  params.stop_token_ids = {1};
  Sampler sampler(params, 3, {}, std::vector<int32_t>{0});
  CHECK(*sampler.sample(row) == 2);
  CHECK(*sampler.sample(row) == 2);
  CHECK(*sampler.sample(row) == 0);

  params.ignore_eos = true;
  Sampler ignoring(params, 3, {}, std::vector<int32_t>{0});
  CHECK(*ignoring.sample(row) == 0);
}

TEST_CASE("sample rejects bad rows without aborting", "[sampler]") {
  SamplingParams params;
  Sampler sampler(params, 4, {}, {});
  auto wrong_size = sampler.sample(std::vector<float>{1.0f, 2.0f});
  CHECK(wrong_size.status().code() == StatusCode::kInvalidArgument);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto all_dead = sampler.sample(std::vector<float>{nan, -kInf, nan, -kInf});
  CHECK(all_dead.status().code() == StatusCode::kFailedPrecondition);
  // NaN entries are dropped, +inf wins.
  auto token = sampler.sample(std::vector<float>{nan, kInf, 3.0f, nan});
  REQUIRE(token.ok());
  CHECK(*token == 1);
  CHECK(sampler.output_count() == 1);
}

std::vector<int32_t> draws(const SamplingParams& params, const std::vector<float>& row, int n) {
  Sampler sampler(params, static_cast<int32_t>(row.size()), {}, {});
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    auto token = sampler.sample(row);
    REQUIRE(token.ok());
    out.push_back(*token);
  }
  return out;
}

std::vector<float> flat_row(int n) {
  std::vector<float> row(n);
  for (int i = 0; i < n; ++i) row[i] = static_cast<float>(std::sin(i * 0.7) * 0.5);
  return row;
}

TEST_CASE("a seed reproduces the draws; another seed does not", "[sampler]") {
  // The generator is the standard's mt19937_64, whose output is fixed by the C++ standard.
  std::mt19937_64 standard;
  standard.discard(9999);
  CHECK(standard() == 9981545732273789042ull);
  CHECK(uniform_from_bits(0) == 0.0);
  CHECK(uniform_from_bits(~0ull) == 1.0 - 0x1.0p-53);
  CHECK(uniform_from_bits(1ull << 63) == 0.5);

  SamplingParams params;
  params.seed = 42;
  const auto row = flat_row(50);
  const auto a = draws(params, row, 300);
  const auto b = draws(params, row, 300);
  CHECK(a == b);
  params.seed = 43;
  CHECK(draws(params, row, 300) != a);
  // The first draws of seed 42 equal the inverse CDF of the generator's raw outputs.
  std::mt19937_64 rng(42);
  std::vector<double> scratch;
  for (int i = 0; i < 20; ++i) {
    CHECK(a[i] == draw_token(row, uniform_from_bits(rng()), scratch));
  }
}

// Pearson chi-square statistic of observed counts against probabilities.
double chi_square(const std::vector<int>& observed, const std::vector<double>& probs, int n) {
  double chi = 0.0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] == 0.0) {
      CHECK(observed[i] == 0);
      continue;
    }
    const double expected = probs[i] * n;
    chi += (observed[i] - expected) * (observed[i] - expected) / expected;
  }
  return chi;
}

TEST_CASE("sampling frequencies match the distribution (chi-square)", "[sampler]") {
  const std::vector<float> row = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, 1.5f, -1.0f, 0.7f, 0.3f, -2.0f};
  constexpr int kDraws = 20000;
  SECTION("temperature 0.8, no filters: 9 degrees of freedom") {
    SamplingParams params;
    params.temperature = 0.8f;
    params.seed = 7;
    std::vector<int> observed(row.size());
    for (int32_t t : draws(params, row, kDraws)) ++observed[t];
    std::vector<float> scaled = row;
    apply_temperature(scaled, 0.8f);
    std::vector<double> probs(row.size());
    REQUIRE(softmax(scaled, probs));
    CHECK(chi_square(observed, probs, kDraws) < 27.88);  // p = 0.001
  }
  SECTION("top_k 3: only the top three, renormalized; 2 degrees of freedom") {
    SamplingParams params;
    params.top_k = 3;
    params.seed = 11;
    std::vector<int> observed(row.size());
    for (int32_t t : draws(params, row, kDraws)) ++observed[t];
    std::vector<float> kept(row.size(), -kInf);
    for (int id : {0, 3, 5}) kept[id] = row[id];
    std::vector<double> probs(row.size());
    REQUIRE(softmax(kept, probs));
    CHECK(chi_square(observed, probs, kDraws) < 13.82);  // p = 0.001
  }
}

// ---- validate() ----

SamplingLimits limits() {
  SamplingLimits l;
  l.n_vocab = 1000;
  l.max_tokens_cap = 4096;
  return l;
}

void expect_invalid(const SamplingParams& params, const std::string& name,
                    const std::string& value) {
  Status status = params.validate(limits());
  INFO(status.to_string());
  CHECK(status.code() == StatusCode::kInvalidArgument);
  CHECK(status.message().find(name) != std::string::npos);
  CHECK(status.message().find(value) != std::string::npos);
  CHECK(status.message().find("must be") != std::string::npos);
}

TEST_CASE("validate accepts defaults and edge values", "[sampler][validate]") {
  SamplingParams params;
  CHECK(params.validate(limits()).ok());
  params.temperature = 0.0f;
  params.top_p = 1.0f;
  params.top_k = -1;
  params.min_p = 1.0f;
  params.presence_penalty = -2.0f;
  params.frequency_penalty = 2.0f;
  params.repetition_penalty = 0.01f;
  params.logit_bias = {{0, -100.0f}, {999, 100.0f}};
  params.max_tokens = 4096;
  params.min_tokens = 4096;
  params.stop = std::vector<std::string>(16, std::string(256, 'x'));
  params.stop_token_ids = {0, 999};
  params.seed = ~0ull;
  CHECK(params.validate(limits()).ok());
}

TEST_CASE("validate names the parameter, the bound and the value", "[sampler][validate]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto with = [](auto change) {
    SamplingParams p;
    change(p);
    return p;
  };
  expect_invalid(with([](auto& p) { p.temperature = -0.5f; }), "temperature", "-0.5");
  expect_invalid(with([&](auto& p) { p.temperature = nan; }), "temperature", "nan");
  expect_invalid(with([](auto& p) { p.temperature = kInf; }), "temperature", "inf");
  expect_invalid(with([](auto& p) { p.top_p = 0.0f; }), "top_p", "(0, 1]");
  expect_invalid(with([](auto& p) { p.top_p = 1.5f; }), "top_p", "1.5");
  expect_invalid(with([&](auto& p) { p.top_p = nan; }), "top_p", "nan");
  expect_invalid(with([](auto& p) { p.top_k = -2; }), "top_k", "-2");
  expect_invalid(with([](auto& p) { p.min_p = -0.1f; }), "min_p", "-0.1");
  expect_invalid(with([](auto& p) { p.min_p = 1.5f; }), "min_p", "[0, 1]");
  expect_invalid(with([](auto& p) { p.repetition_penalty = 0.0f; }), "repetition_penalty", "0");
  expect_invalid(with([](auto& p) { p.repetition_penalty = -1.0f; }), "repetition_penalty", "-1");
  expect_invalid(with([](auto& p) { p.repetition_penalty = kInf; }), "repetition_penalty", "inf");
  expect_invalid(with([](auto& p) { p.presence_penalty = 2.5f; }), "presence_penalty", "2.5");
  expect_invalid(with([&](auto& p) { p.presence_penalty = nan; }), "presence_penalty", "nan");
  expect_invalid(with([](auto& p) { p.frequency_penalty = -3.0f; }), "frequency_penalty", "-3");
  expect_invalid(with([](auto& p) { p.logit_bias = {{1000, 1.0f}}; }), "logit_bias", "1000");
  expect_invalid(with([](auto& p) { p.logit_bias = {{-1, 1.0f}}; }), "logit_bias", "-1");
  expect_invalid(with([](auto& p) { p.logit_bias = {{5, 100.5f}}; }), "logit_bias[5]", "100.5");
  expect_invalid(with([&](auto& p) { p.logit_bias = {{5, nan}}; }), "logit_bias[5]", "nan");
  expect_invalid(with([](auto& p) {
                   for (int i = 0; i < 1025; ++i) p.logit_bias[i] = 1.0f;
                 }),
                 "logit_bias", "1025");
  expect_invalid(with([](auto& p) { p.max_tokens = 0; }), "max_tokens", "0");
  expect_invalid(with([](auto& p) { p.max_tokens = -5; }), "max_tokens", "-5");
  expect_invalid(with([](auto& p) { p.max_tokens = 4097; }), "max_tokens", "4097");
  expect_invalid(with([](auto& p) { p.min_tokens = -1; }), "min_tokens", "-1");
  expect_invalid(with([](auto& p) { p.logprobs = 21; }), "logprobs", "21");
  expect_invalid(with([](auto& p) { p.logprobs = -1; }), "logprobs", "-1");
  expect_invalid(with([](auto& p) {
                   p.max_tokens = 10;
                   p.min_tokens = 11;
                 }),
                 "min_tokens", "11");
  expect_invalid(with([](auto& p) { p.stop = std::vector<std::string>(17, "x"); }), "stop", "17");
  expect_invalid(with([](auto& p) { p.stop = {"ok", std::string(257, 'y')}; }), "stop[1]", "257");
  expect_invalid(with([](auto& p) { p.stop = {""}; }), "stop[0]", "0 bytes");
  expect_invalid(with([](auto& p) { p.stop_token_ids = {3, 1000}; }), "stop_token_ids", "1000");
  expect_invalid(with([](auto& p) { p.stop_token_ids = std::vector<int32_t>(257, 1); }),
                 "stop_token_ids", "257");
}

}  // namespace
}  // namespace tandem::runtime
