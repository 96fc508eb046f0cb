// PassTimings: the report's arithmetic, and ModelRunner filling one part by part (a model with a
// leading dense layer and a shared expert, and an all-MoE one).
#include "engine/runtime/pass_timings.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/runtime/runtime_fixture.h"

namespace tandem::runtime::testing {
namespace {

TEST_CASE("format_pass_timings gives ms per pass and shares of the parts that took time",
          "[runtime][pass_timings]") {
  PassTimings t;
  CHECK(format_pass_timings(t) == "no pass recorded\n");
  t.passes = 2;
  t.tokens = 10;
  t.seconds[static_cast<size_t>(PassPart::kAttention)] = 0.004;
  t.seconds[static_cast<size_t>(PassPart::kExperts)] = 0.012;
  t.seconds[static_cast<size_t>(PassPart::kHead)] = 0.004;
  CHECK(t.total_seconds() == Approx(0.020));
  const std::string text = format_pass_timings(t);
  CHECK(text ==
        "part            ms/pass   share\n"
        "attention         2.000   20.0%\n"
        "experts           6.000   60.0%\n"
        "head              2.000   20.0%\n"
        "all              10.000  100.0%  (passes: 2, tokens a pass: 5.0)\n");
  t.clear();
  CHECK(t.passes == 0);
  CHECK(t.total_seconds() == 0.0);
}

TEST_CASE("a pass clock without a sink records nothing; with one it counts the pass",
          "[runtime][pass_timings]") {
  PassClock idle(nullptr);
  idle.mark(PassPart::kAttention);
  idle.finish(3);  // nothing to write to: must not crash
  PassTimings t;
  PassClock clock(&t);
  clock.mark(PassPart::kSetup);
  clock.mark(PassPart::kHead);
  clock.finish(7);
  CHECK(t.passes == 1);
  CHECK(t.tokens == 7);
  CHECK(t.at(PassPart::kSetup) >= 0.0);
  CHECK(t.at(PassPart::kHead) >= 0.0);
  CHECK(t.at(PassPart::kExperts) == 0.0);
}

// One prefill of `ids` and one decode step with a sink set, then a pass without it.
PassTimings profile_two_passes(ModelRunner& runner, const std::vector<int32_t>& ids) {
  PassTimings t;
  auto cache = runner.new_kv_cache();
  ForwardOutput out;
  runner.set_pass_timings(&t);
  SequenceInput prefill{cache.get(), ids, 0, LogitsWanted::kLast};
  REQUIRE(runner.forward({&prefill, 1}, out).ok());
  const std::vector<int32_t> one{ids.front()};
  SequenceInput step{cache.get(), one, cache->length(), LogitsWanted::kLast};
  REQUIRE(runner.forward({&step, 1}, out).ok());
  runner.set_pass_timings(nullptr);
  const PassTimings before = t;
  SequenceInput again{cache.get(), one, cache->length(), LogitsWanted::kLast};
  REQUIRE(runner.forward({&again, 1}, out).ok());
  CHECK(t.passes == before.passes);  // not recorded once the sink is gone
  CHECK(t.seconds == before.seconds);
  return t;
}

TEST_CASE("ModelRunner adds each part of its passes to the pass timings",
          "[runtime][pass_timings]") {
  const std::vector<int32_t> ids{1, 2, 3, 4, 5};
  SECTION("a leading dense layer and a shared expert (tiny deepseek2)") {
    auto m =
        load_model(std::string(TANDEM_SHARED_DIR) + "/data/tiny-deepseek2/tiny-deepseek2-f32.gguf");
    const PassTimings t = profile_two_passes(*m->runner, ids);
    CHECK(t.passes == 2);
    CHECK(t.tokens == ids.size() + 1);
    for (PassPart p : {PassPart::kAttention, PassPart::kDenseFfn, PassPart::kMoeInput,
                       PassPart::kExperts, PassPart::kMoeOutput, PassPart::kHead}) {
      INFO(pass_part_name(p));
      CHECK(t.at(p) > 0.0);
    }
  }
  SECTION("every layer MoE, no shared expert (tiny-moe)") {
    auto m = load_model(tiny_moe_dir() + "tiny-moe-f32.gguf");
    const PassTimings t = profile_two_passes(*m->runner, ids);
    CHECK(t.passes == 2);
    CHECK(t.tokens == ids.size() + 1);
    CHECK(t.at(PassPart::kDenseFfn) == 0.0);  // no dense layer ran
    for (PassPart p : {PassPart::kAttention, PassPart::kExperts, PassPart::kHead}) {
      INFO(pass_part_name(p));
      CHECK(t.at(p) > 0.0);
    }
  }
}

}  // namespace
}  // namespace tandem::runtime::testing
