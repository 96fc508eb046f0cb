// Tests of ActivationStats, ActivationRecorder and SharedActivationStats.
#include <catch2/catch.hpp>

#include <limits>
#include <thread>
#include <vector>

#include "engine/placement/activation_stats.h"

namespace tandem::placement {
namespace {

// 4 layers, layer 0 dense (DeepSeek-style first_k_dense_replace = 1), 6 experts, top-2.
ModelIdentity identity() {
  ModelIdentity m;
  m.architecture = "qwen3moe";
  m.n_layers = 4;
  m.n_experts = 6;
  m.n_experts_used = 2;
  m.hidden_size = 64;
  m.moe_layers = {false, true, true, true};
  m.fingerprint = "fnv1a64:0123456789abcdef";
  return m;
}

ActivationStats make() {
  Result<ActivationStats> s = ActivationStats::create(identity());
  REQUIRE(s.ok());
  return std::move(s).value();
}

TEST_CASE("stats: rows are the MoE layers", "[placement]") {
  const ActivationStats s = make();
  CHECK(s.n_rows() == 3);
  CHECK(s.moe_layer_ids() == std::vector<uint32_t>{1, 2, 3});
  CHECK(s.row_of(0) == -1);
  CHECK(s.row_of(2) == 1);
  CHECK(s.row_of(99) == -1);
  CHECK(s.counts().size() == 18);
  CHECK(s.total() == 0);
}

TEST_CASE("stats: inconsistent identities are refused", "[placement]") {
  ModelIdentity m = identity();
  m.moe_layers = {true, true};
  CHECK_THAT(ActivationStats::create(m).status().message(), Catch::Contains("moe_layers"));
  m = identity();
  m.moe_layers = {false, false, false, false};
  CHECK_THAT(ActivationStats::create(m).status().message(), Catch::Contains("no layer"));
  m = identity();
  m.n_experts = 0;
  CHECK_FALSE(ActivationStats::create(m).ok());
  m = identity();
  m.n_experts_used = 7;
  CHECK_THAT(ActivationStats::create(m).status().message(), Catch::Contains("n_experts_used"));
}

TEST_CASE("recorder: counts ids per layer, ignores padding and dense layers", "[placement]") {
  ActivationStats s = make();
  ActivationRecorder rec(s);
  const std::vector<int32_t> two_tokens = {0, 5, 5, 2};  // token 1 -> {0, 5}, token 2 -> {5, 2}
  rec.record(1, two_tokens);
  rec.record(3, std::vector<int32_t>{-1, 4, 6});  // -1 padding and 6 out of range
  rec.record(0, std::vector<int32_t>{1, 2});      // dense layer
  rec.add_tokens(2);
  CHECK(rec.ignored() == 4);
  CHECK(s.total() == 0);  // nothing shared until folded
  rec.fold_into(s);
  CHECK(s.count(0, 0) == 1);
  CHECK(s.count(0, 5) == 2);
  CHECK(s.count(0, 2) == 1);
  CHECK(s.count(2, 4) == 1);
  CHECK(s.total() == 5);
  CHECK(s.tokens() == 2);
  rec.fold_into(s);  // folding zeroed the recorder
  CHECK(s.total() == 5);
  CHECK(s.tokens() == 2);
}

TEST_CASE("shared stats: recorders on several threads add up exactly", "[placement]") {
  SharedActivationStats shared(make());
  constexpr int kThreads = 4;
  constexpr int kSteps = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&shared, t] {
      ActivationRecorder rec = shared.make_recorder();
      for (int step = 0; step < kSteps; ++step) {
        const std::vector<int32_t> ids = {t, (t + step) % 6};
        rec.record(1 + static_cast<uint64_t>(step % 3), ids);
        rec.add_tokens(1);
        if (step % 50 == 49) shared.fold(rec);
      }
      shared.fold(rec);
    });
  }
  for (std::thread& th : threads) th.join();
  const ActivationStats s = shared.snapshot();
  CHECK(s.tokens() == kThreads * kSteps);
  // The same selections recorded by one thread, one increment at a time.
  ActivationStats expected = make();
  for (int t = 0; t < kThreads; ++t) {
    for (int step = 0; step < kSteps; ++step) {
      expected.add(static_cast<size_t>(step % 3), static_cast<uint64_t>(t), 1);
      expected.add(static_cast<size_t>(step % 3), static_cast<uint64_t>((t + step) % 6), 1);
    }
  }
  CHECK(std::vector<uint64_t>(s.counts().begin(), s.counts().end()) ==
        std::vector<uint64_t>(expected.counts().begin(), expected.counts().end()));
}

TEST_CASE("stats: merge adds counts and tokens of the same model only", "[placement]") {
  ActivationStats a = make();
  ActivationStats b = make();
  a.add(0, 1, 3);
  a.add_tokens(10);
  b.add(0, 1, 4);
  b.add(2, 5, 1);
  b.add_tokens(5);
  REQUIRE(a.merge(b).ok());
  CHECK(a.count(0, 1) == 7);
  CHECK(a.count(2, 5) == 1);
  CHECK(a.tokens() == 15);

  ModelIdentity other = identity();
  other.fingerprint = "fnv1a64:ffffffffffffffff";
  ActivationStats c = ActivationStats::create(other).value();
  const Status st = a.merge(c);
  CHECK(st.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(st.message(), Catch::Contains("fingerprint is fnv1a64:ffffffffffffffff in the file, "
                                           "fnv1a64:0123456789abcdef in the model"));

  ActivationStats big = make();
  big.add(1, 1, std::numeric_limits<uint64_t>::max());
  ActivationStats one = make();
  one.add(1, 1, 1);
  CHECK(big.merge(one).code() == StatusCode::kOutOfRange);
  CHECK(big.count(1, 1) == std::numeric_limits<uint64_t>::max());
}

TEST_CASE("stats: table() labels rows with model layers", "[placement]") {
  ActivationStats s = make();
  s.add(1, 3, 42);
  const ExpertTable t = s.table();
  CHECK(t.layers == std::vector<uint32_t>{1, 2, 3});
  CHECK(t.n_experts == 6);
  CHECK(t.at(1, 3) == 42.0);
  CHECK(validate_table(t).ok());
}

}  // namespace
}  // namespace tandem::placement
