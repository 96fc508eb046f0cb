// Tests of MoeActivity: live counts, per-request GPU/CPU counters under a split placement,
// finished-request eviction, merged = loaded + live and expert seconds per device. Expected values
// are worked out by hand from the hand-made routings below.
#include "server/moe_activity.h"

#include <catch2/catch.hpp>
#include <limits>
#include <string>
#include <vector>

namespace tandem::server {
namespace {

using placement::ActivationStats;
using placement::Device;
using placement::DeviceMap;
using placement::ModelIdentity;
using runtime::RoutedToken;

// Three layers, the middle one dense; four experts, top-2.
ModelIdentity test_model() {
  ModelIdentity m;
  m.architecture = "qwen3moe";
  m.n_layers = 3;
  m.n_experts = 4;
  m.n_experts_used = 2;
  m.hidden_size = 8;
  m.moe_layers = {true, false, true};
  m.fingerprint = "fnv1a64:00000000000000aa";
  return m;
}

// Layer 0: experts 0 and 1 on the GPU. Layer 2: expert 3 on the GPU.
DeviceMap split_map() {
  DeviceMap map({0, 2}, 4);
  map.set_row(0, 0, Device::kGpu);
  map.set_row(0, 1, Device::kGpu);
  map.set_row(1, 3, Device::kGpu);
  return map;
}

experts::Routing routing_of(std::vector<int32_t> experts, size_t k) {
  experts::Routing r;
  r.k = k;
  r.n_tokens = experts.size() / k;
  r.weights.assign(experts.size(), 0.5f);
  r.experts = std::move(experts);
  return r;
}

std::unique_ptr<MoeActivity> make_activity(size_t max_finished = MoeActivity::kDefaultMaxFinished) {
  Result<std::unique_ptr<MoeActivity>> a =
      MoeActivity::create(test_model(), std::nullopt, split_map(), max_finished);
  REQUIRE(a.ok());
  return std::move(*a);
}

// Rows 0-1: request "a" prefill; row 2: request "b" decode.
void first_forward(MoeActivity& activity, const std::string& a, const std::string& b) {
  const std::vector<experts::Routing> routing = {
      routing_of({0, 1, /**/ 1, 2, /**/ 2, 3}, 2),   // layer 0
      experts::Routing{},                            // layer 1: dense
      routing_of({3, 0, /**/ 2, 1, /**/ 3, -1}, 2),  // layer 2 (-1: padding)
  };
  const std::vector<RoutedToken> tokens = {{&a, true}, {&a, true}, {&b, false}};
  activity.on_forward(routing, tokens);
}

TEST_CASE("MoeActivity counts live activations and per-request GPU/CPU work", "[server]") {
  std::unique_ptr<MoeActivity> activity = make_activity();
  const std::string a = "req-a";
  const std::string b = "req-b";
  activity->on_started(a);
  activity->on_started(b);
  first_forward(*activity, a, b);

  const ActivationStats live = activity->live();
  CHECK(live.tokens() == 3);
  REQUIRE(live.n_rows() == 2);
  CHECK(std::vector<uint64_t>(live.counts().begin(), live.counts().end()) ==
        std::vector<uint64_t>{1, 2, 2, 1, /**/ 1, 1, 1, 2});

  // a's prefill: layer 0 row 0 {0,1} GPU only, row 1 {1,2} split; layer 2 row 0 {3,0} split,
  // row 1 {2,1} CPU only.
  const std::optional<RequestMoeSnapshot> ra = activity->request(a);
  REQUIRE(ra.has_value());
  CHECK(ra->state == RequestActivityState::kRunning);
  CHECK(ra->prompt_tokens == 2);
  CHECK(ra->generated_tokens == 0);
  CHECK(ra->prefill == MoeCounters{1, 1, 2, 4, 4});
  CHECK(ra->decode == MoeCounters{});

  // b's decode row: layer 0 {2,3} CPU only; layer 2 {3} (padding dropped) GPU only.
  const std::optional<RequestMoeSnapshot> rb = activity->request(b);
  REQUIRE(rb.has_value());
  CHECK(rb->prompt_tokens == 0);
  CHECK(rb->generated_tokens == 1);
  CHECK(rb->prefill == MoeCounters{});
  CHECK(rb->decode == MoeCounters{1, 1, 0, 1, 2});

  CHECK(activity->expert_pairs(true) == 5);
  CHECK(activity->expert_pairs(false) == 6);

  // a decodes one token: layer 0 {0,3} split, layer 2 {3,2} split.
  const std::vector<experts::Routing> step = {routing_of({0, 3}, 2), experts::Routing{},
                                              routing_of({3, 2}, 2)};
  const std::vector<RoutedToken> one = {{&a, false}};
  activity->on_forward(step, one);
  const std::optional<RequestMoeSnapshot> ra2 = activity->request(a);
  REQUIRE(ra2.has_value());
  CHECK(ra2->generated_tokens == 1);
  CHECK(ra2->prefill == MoeCounters{1, 1, 2, 4, 4});
  CHECK(ra2->decode == MoeCounters{0, 0, 2, 2, 2});
  CHECK(activity->live().tokens() == 4);
  CHECK(activity->expert_pairs(true) == 7);
  CHECK(activity->expert_pairs(false) == 8);

  activity->on_finished(a);
  CHECK(activity->request(a)->state == RequestActivityState::kFinished);
  CHECK(activity->request(b)->state == RequestActivityState::kRunning);
}

TEST_CASE("MoeActivity without GPU experts counts everything as CPU work", "[server]") {
  Result<std::unique_ptr<MoeActivity>> made =
      MoeActivity::create(test_model(), std::nullopt, DeviceMap{});
  REQUIRE(made.ok());
  MoeActivity& activity = **made;
  const std::string a = "a";
  const std::string b = "b";
  activity.on_started(a);
  activity.on_started(b);
  first_forward(activity, a, b);
  CHECK(activity.request(a)->prefill == MoeCounters{0, 4, 0, 0, 8});
  CHECK(activity.request(b)->decode == MoeCounters{0, 2, 0, 0, 3});
  CHECK(activity.expert_pairs(true) == 0);
  CHECK(activity.expert_pairs(false) == 11);
}

TEST_CASE("MoeActivity knows requests from on_started and evicts the oldest finished", "[server]") {
  std::unique_ptr<MoeActivity> activity = make_activity(/*max_finished=*/2);
  CHECK_FALSE(activity->request("c").has_value());
  activity->on_finished("never-started");  // ignored: aborted while queued
  CHECK_FALSE(activity->request("never-started").has_value());

  for (const char* id : {"c", "d", "e"}) activity->on_started(id);
  for (const char* id : {"c", "d", "e"}) activity->on_finished(id);
  CHECK_FALSE(activity->request("c").has_value());
  CHECK(activity->request("d")->state == RequestActivityState::kFinished);
  CHECK(activity->request("e")->state == RequestActivityState::kFinished);

  // "d" is reused: it runs again from zero and is no longer among the finished ones, so the
  // next finished request evicts nothing.
  const std::string d = "d";
  const std::string e = "e";
  first_forward(*activity, d, e);  // d: prefill rows; e is finished but still counted
  CHECK(activity->request("d")->prompt_tokens == 2);
  activity->on_started(d);
  CHECK(activity->request("d")->state == RequestActivityState::kRunning);
  CHECK(activity->request("d")->prompt_tokens == 0);
  activity->on_started("f");
  activity->on_finished("f");
  CHECK(activity->request("e").has_value());
  CHECK(activity->request("f").has_value());
  CHECK(activity->tracked_requests() == 3);

  // d finishes: three finished now, the oldest (e) goes, even though d's stale entry is older.
  activity->on_finished("d");
  CHECK_FALSE(activity->request("e").has_value());
  CHECK(activity->request("f").has_value());
  CHECK(activity->request("d")->state == RequestActivityState::kFinished);
  CHECK(activity->tracked_requests() == 2);
}

TEST_CASE("MoeActivity merged = loaded + live; refuses a mismatched placement or statistics",
          "[server]") {
  Result<ActivationStats> loaded = ActivationStats::create(test_model());
  REQUIRE(loaded.ok());
  loaded->add(0, 1, 10);
  loaded->add(1, 3, 7);
  loaded->add_tokens(100);
  Result<std::unique_ptr<MoeActivity>> made =
      MoeActivity::create(test_model(), *loaded, split_map());
  REQUIRE(made.ok());
  MoeActivity& activity = **made;
  CHECK(activity.has_loaded());
  const std::string a = "a";
  const std::string b = "b";
  first_forward(activity, a, b);

  const Result<ActivationStats> merged = activity.merged();
  REQUIRE(merged.ok());
  CHECK(merged->tokens() == 103);
  CHECK(std::vector<uint64_t>(merged->counts().begin(), merged->counts().end()) ==
        std::vector<uint64_t>{1, 12, 2, 1, /**/ 1, 1, 1, 9});
  CHECK(activity.live().tokens() == 3);

  // Without loaded statistics merged is the live table.
  std::unique_ptr<MoeActivity> plain = make_activity();
  first_forward(*plain, a, b);
  const Result<ActivationStats> plain_merged = plain->merged();
  REQUIRE(plain_merged.ok());
  CHECK(std::vector<uint64_t>(plain_merged->counts().begin(), plain_merged->counts().end()) ==
        std::vector<uint64_t>{1, 2, 2, 1, /**/ 1, 1, 1, 2});

  ModelIdentity other = test_model();
  other.fingerprint = "fnv1a64:00000000000000bb";
  Result<ActivationStats> foreign = ActivationStats::create(other);
  REQUIRE(foreign.ok());
  const Result<std::unique_ptr<MoeActivity>> mismatch =
      MoeActivity::create(test_model(), *foreign, split_map());
  REQUIRE_FALSE(mismatch.ok());
  CHECK(mismatch.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(mismatch.status().message(), Catch::Contains("fingerprint"));

  const Result<std::unique_ptr<MoeActivity>> dense_in_map =
      MoeActivity::create(test_model(), std::nullopt, DeviceMap({0, 1}, 4));
  REQUIRE_FALSE(dense_in_map.ok());
  CHECK(dense_in_map.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(dense_in_map.status().message(), Catch::Contains("layer 1"));

  const Result<std::unique_ptr<MoeActivity>> wrong_width =
      MoeActivity::create(test_model(), std::nullopt, DeviceMap({0, 2}, 8));
  REQUIRE_FALSE(wrong_width.ok());
  CHECK(wrong_width.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("MoeActivity sums expert worker seconds: worker 0 as CPU, the others as GPU",
          "[server]") {
  std::unique_ptr<MoeActivity> activity = make_activity();
  CHECK(activity->expert_nanoseconds(false) == 0);
  CHECK(activity->expert_nanoseconds(true) == 0);
  // Binary fractions of a second: exact in nanoseconds.
  activity->on_expert_seconds(std::vector<double>{0.25, 0.5});
  CHECK(activity->expert_nanoseconds(false) == 250'000'000);
  CHECK(activity->expert_nanoseconds(true) == 500'000'000);
  activity->on_expert_seconds(std::vector<double>{0.125});             // no GPU worker
  activity->on_expert_seconds(std::vector<double>{0.0, 0.125, 0.25});  // two GPU workers
  CHECK(activity->expert_nanoseconds(false) == 375'000'000);
  CHECK(activity->expert_nanoseconds(true) == 875'000'000);
  // Bad entries are dropped one by one; the good ones of the same pass still count.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  activity->on_expert_seconds(std::vector<double>{-1.0, nan, 0.125});
  activity->on_expert_seconds(std::vector<double>{nan, inf, 1e300});
  activity->on_expert_seconds(std::vector<double>{});
  CHECK(activity->expert_nanoseconds(false) == 375'000'000);
  CHECK(activity->expert_nanoseconds(true) == 1'000'000'000);
  // Seconds say nothing about pairs, and pairs nothing about seconds.
  CHECK(activity->expert_pairs(false) == 0);
  CHECK(activity->expert_pairs(true) == 0);
  first_forward(*activity, "a", "b");
  CHECK(activity->expert_nanoseconds(false) == 375'000'000);
}

}  // namespace
}  // namespace tandem::server
