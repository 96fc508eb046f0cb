// MoeLayer's concurrent path: helper threads, errors, the pool rule, worker seconds, timings.
#include <catch2/catch.hpp>

#include <chrono>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

#include "engine/experts/experts.h"
#include "tests/runtime/runtime_fixture.h"

namespace tandem::experts {
namespace {

using runtime::testing::load_model;
using runtime::testing::tiny_moe_dir;

// Writes row p = (expert + 1) * x_token + p for each of its pairs (a function of the pair only,
// like a real worker), or fails with `fail` when set. Counts its calls and threads; sleeps for
// `delay` per call first (a slow worker).
class FakeWorker final : public ExpertWorker {
 public:
  explicit FakeWorker(const ThreadPool* pool = nullptr) : pool_(pool) {}
  std::string_view name() const override { return "fake"; }
  Status run(const ExpertJob& job) override {
    ++calls;
    threads.push_back(std::this_thread::get_id());
    pairs += job.groups->pairs.size();
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    if (!fail.ok()) return fail;
    const ExpertGroups& g = *job.groups;
    for (size_t i = 0; i < g.expert_ids.size(); ++i) {
      for (size_t j = g.offsets[i]; j < g.offsets[i + 1]; ++j) {
        const size_t p = g.pairs[j];
        const size_t t = p / job.k;
        for (size_t c = 0; c < job.hidden; ++c) {
          job.pair_out[p * job.hidden + c] =
              static_cast<float>(g.expert_ids[i] + 1) * job.input[t * job.hidden + c] +
              static_cast<float>(p);
        }
      }
    }
    return Status();
  }
  const ThreadPool* thread_pool() const override { return pool_; }

  Status fail;
  std::chrono::microseconds delay{0};
  size_t calls = 0;
  size_t pairs = 0;
  std::vector<std::thread::id> threads;

 private:
  const ThreadPool* pool_;
};

struct Problem {
  size_t n_tokens = 7;
  size_t hidden = 5;
  size_t n_experts = 6;
  Routing routing;
  std::vector<float> input;
};

Problem make_problem(uint32_t seed) {
  Problem pr;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  pr.input.resize(pr.n_tokens * pr.hidden);
  for (float& v : pr.input) v = u(rng);
  std::vector<float> logits(pr.n_tokens * pr.n_experts);
  for (float& v : logits) v = 3.0f * u(rng);
  route(logits, pr.n_tokens, pr.n_experts, 2, RouterRecipe{.renormalize = true}, pr.routing);
  return pr;
}

std::vector<float> run_layer(MoeLayer& moe, const Problem& pr, const ExpertMap& map,
                             size_t layer = 0) {
  std::vector<float> out(pr.n_tokens * pr.hidden, -1.0f);
  const Status s =
      moe.run(layer, pr.n_experts, pr.input, pr.n_tokens, pr.hidden, pr.routing, map, out);
  INFO(s.to_string());
  REQUIRE(s.ok());
  return out;
}

TEST_CASE("MoeLayer runs extra workers on one persistent helper thread, bit-identically",
          "[experts]") {
  const Problem pr = make_problem(7);
  FakeWorker solo;
  MoeLayer single({&solo});
  CHECK(single.n_concurrent_workers() == 0);
  const std::vector<float> expected = run_layer(single, pr, ExpertMap());

  FakeWorker a;
  FakeWorker b;
  FakeWorker c;
  MoeLayer moe({&a, &b, &c});
  CHECK(moe.n_concurrent_workers() == 2);
  std::mt19937 rng(3);
  for (int call = 0; call < 8; ++call) {
    ExpertMap map = ExpertMap::uniform(2, pr.n_experts, 0);
    for (size_t l = 0; l < 2; ++l) {
      for (size_t e = 0; e < pr.n_experts; ++e) map.set(l, e, static_cast<uint8_t>(rng() % 3));
    }
    CHECK(run_layer(moe, pr, map, call % 2) == expected);
  }
  CHECK(a.pairs + b.pairs + c.pairs == 8 * pr.n_tokens * 2);
  for (const FakeWorker* w : {&b, &c}) {
    REQUIRE(w->calls > 0);
    for (const auto& id : w->threads) CHECK(id == w->threads.front());
    CHECK(w->threads.front() != std::this_thread::get_id());
  }
  CHECK(b.threads.front() != c.threads.front());
  for (const auto& id : a.threads) CHECK(id == std::this_thread::get_id());
}

TEST_CASE("MoeLayer runs workers sharing a pool, or listed twice, on the caller", "[experts]") {
  ThreadPool pool(2);
  FakeWorker a(&pool);
  FakeWorker b(&pool);
  ThreadPool other(1);
  FakeWorker c(&other);
  MoeLayer moe({&a, &b, &c});
  CHECK(moe.n_concurrent_workers() == 1);  // only c
  FakeWorker d;
  MoeLayer twice({&d, &d});
  CHECK(twice.n_concurrent_workers() == 0);

  const Problem pr = make_problem(11);
  FakeWorker solo;
  MoeLayer single({&solo});
  const std::vector<float> expected = run_layer(single, pr, ExpertMap());
  ExpertMap map = ExpertMap::uniform(1, pr.n_experts, 0);
  for (size_t e = 0; e < pr.n_experts; ++e) map.set(0, e, static_cast<uint8_t>(e % 3));
  CHECK(run_layer(moe, pr, map) == expected);
  REQUIRE(b.calls + c.calls > 0);
  for (const auto& id : b.threads) CHECK(id == std::this_thread::get_id());
  for (const auto& id : c.threads) CHECK(id != std::this_thread::get_id());
}

TEST_CASE("an error of a helper-thread worker comes back after the join", "[experts]") {
  const Problem pr = make_problem(5);
  FakeWorker a;
  FakeWorker b;
  MoeLayer moe({&a, &b});
  ExpertMap map = ExpertMap::uniform(1, pr.n_experts, 0);
  for (size_t e = 0; e < pr.n_experts; e += 2) map.set(0, e, 1);
  std::vector<float> out(pr.n_tokens * pr.hidden);
  const auto run = [&] {
    return moe.run(0, pr.n_experts, pr.input, pr.n_tokens, pr.hidden, pr.routing, map, out);
  };
  REQUIRE(run().ok());
  const std::vector<float> good = out;

  b.fail = internal_error("device lost");
  const size_t a_calls = a.calls;
  Status s = run();
  CHECK(s.code() == StatusCode::kInternal);
  CHECK(s.message() == "device lost");
  CHECK(a.calls == a_calls + 1);  // the caller's share ran too

  a.fail = unavailable_error("cpu share failed");
  s = run();
  CHECK(s.code() == StatusCode::kUnavailable);  // worker 0's error comes first

  // The helper is not wedged by an error: the next call succeeds and gives the same result.
  a.fail = Status();
  b.fail = Status();
  REQUIRE(run().ok());
  CHECK(out == good);
}

TEST_CASE("MoeLayer timings count tokens and pairs per worker exactly", "[experts]") {
  const Problem pr = make_problem(9);
  FakeWorker a;
  FakeWorker b;
  MoeLayer moe({&a, &b});
  ExpertMap map = ExpertMap::uniform(3, pr.n_experts, 0);
  for (size_t e = 0; e < pr.n_experts; ++e) map.set(2, e, e < 2 ? 1 : 0);
  // Pairs of worker 1 on layer 2: those routed to experts 0 and 1.
  uint64_t expected_b = 0;
  for (int32_t e : pr.routing.experts) expected_b += e < 2 ? 1 : 0;

  run_layer(moe, pr, map, 2);  // not recorded: no sink yet
  MoeLayerTimings timings;
  moe.set_timings(&timings);
  run_layer(moe, pr, map, 2);
  run_layer(moe, pr, map, 2);
  run_layer(moe, pr, ExpertMap(), 1);
  REQUIRE(timings.layers.size() == 3);
  CHECK(timings.layers[0].calls == 0);
  const MoeLayerStats& l1 = timings.layers[1];
  CHECK(l1.calls == 1);
  CHECK(l1.tokens == pr.n_tokens);
  CHECK(l1.pairs == std::vector<uint64_t>{pr.n_tokens * 2, 0});
  CHECK(l1.seconds[1] == 0.0);
  const MoeLayerStats& l2 = timings.layers[2];
  CHECK(l2.calls == 2);
  CHECK(l2.tokens == 2 * pr.n_tokens);
  CHECK(l2.pairs == std::vector<uint64_t>{2 * (pr.n_tokens * 2 - expected_b), 2 * expected_b});
  for (const MoeLayerStats* s : {&l1, &l2}) {
    CHECK(s->seconds[0] >= 0.0);
    CHECK(s->seconds[1] >= 0.0);
    CHECK(s->joined_seconds >= 0.0);
  }
  moe.set_timings(nullptr);
  run_layer(moe, pr, map, 2);
  CHECK(timings.layers[2].calls == 2);
}

TEST_CASE("MoeLayer always adds each worker's share time to its worker seconds", "[experts]") {
  const Problem pr = make_problem(13);
  FakeWorker a;
  FakeWorker b;
  FakeWorker idle;
  a.delay = std::chrono::microseconds(2000);
  b.delay = std::chrono::microseconds(2000);
  MoeLayer moe({&a, &b, &idle});
  REQUIRE(moe.n_concurrent_workers() == 2);
  ExpertMap map = ExpertMap::uniform(2, pr.n_experts, 0);
  for (size_t l = 0; l < 2; ++l) {
    for (size_t e = 0; e < pr.n_experts; e += 2) map.set(l, e, 1);  // worker 2 owns nothing
  }
  std::vector<float> expected;
  {
    FakeWorker solo;
    MoeLayer single({&solo});
    expected = run_layer(single, pr, ExpertMap());
  }
  REQUIRE(moe.worker_seconds().size() == 3);
  CHECK(moe.worker_seconds()[0] == 0.0);

  // No sink: still measured, and the result is unchanged.
  CHECK(run_layer(moe, pr, map, 0) == expected);
  CHECK(run_layer(moe, pr, map, 1) == expected);
  REQUIRE(a.calls == 2);
  REQUIRE(b.calls == 2);
  const std::vector<double> two_layers(moe.worker_seconds().begin(), moe.worker_seconds().end());
  CHECK(two_layers[0] > 0.0);
  CHECK(two_layers[1] > 0.0);  // measured on the helper thread, concurrently with worker 0
  CHECK(two_layers[2] == 0.0);
  CHECK(idle.calls == 0);

  // reset starts over; with a sink, the sink's per-layer share times are the same numbers.
  moe.reset_worker_seconds();
  CHECK(moe.worker_seconds()[0] == 0.0);
  CHECK(moe.worker_seconds()[1] == 0.0);
  MoeLayerTimings timings;
  moe.set_timings(&timings);
  CHECK(run_layer(moe, pr, map, 1) == expected);
  REQUIRE(timings.layers.size() == 2);
  CHECK(moe.worker_seconds()[0] > 0.0);
  CHECK(moe.worker_seconds()[1] > 0.0);
  for (size_t w = 0; w < 3; ++w) CHECK(timings.layers[1].seconds[w] == moe.worker_seconds()[w]);

  // A failing share is timed too (it ran).
  moe.reset_worker_seconds();
  b.fail = internal_error("device lost");
  std::vector<float> out(pr.n_tokens * pr.hidden);
  CHECK(!moe.run(0, pr.n_experts, pr.input, pr.n_tokens, pr.hidden, pr.routing, map, out).ok());
  CHECK(moe.worker_seconds()[1] > 0.0);
}

TEST_CASE("overlap_fraction and the timings table", "[experts]") {
  CHECK(overlap_fraction(2.0, 1.0, 2.0) == Approx(1.0));  // the shorter share fully hidden
  CHECK(overlap_fraction(2.0, 1.0, 3.0) == Approx(0.0));  // one after the other
  CHECK(overlap_fraction(2.0, 1.0, 2.5) == Approx(0.5));
  CHECK(overlap_fraction(0.0, 1.0, 1.0) == 0.0);

  MoeLayerTimings t;
  MoeLayerStats& s = t.at(1, 2);
  s.calls = 3;
  s.tokens = 12;
  s.pairs = {20, 4};
  s.seconds = {0.004, 0.002};
  s.joined_seconds = 0.005;
  const std::string table = format_moe_timings(t, "cpu", "gpu");
  std::istringstream in(table);
  std::string line;
  std::vector<std::vector<std::string>> rows;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<std::string> row;
    for (std::string f; fields >> f;) row.push_back(f);
    rows.push_back(row);
  }
  REQUIRE(rows.size() == 3);  // header, layer 1 (layer 0 has no calls), total
  CHECK(rows[0][0] == "layer");
  CHECK(rows[1] ==
        std::vector<std::string>{"1", "12", "20", "4", "4.000", "2.000", "5.000", "0.50"});
  CHECK(rows[2][0] == "all");
}

TEST_CASE("ModelRunner records per-layer MoE timings for a split forward pass", "[experts]") {
  for (const char* variant : {"f32", "q8_0"}) {
    auto model = load_model(tiny_moe_dir() + "tiny-moe-" + variant + ".gguf", 2);
    runtime::ModelRunner& runner = *model->runner;
    const auto& spec = runner.spec();
    ThreadPool second_pool(1);
    auto second = CpuExpertWorker::create(spec, *model->checkpoint.weights, &second_pool,
                                          kernels::MatmulActivations::kQuantized);
    REQUIRE(second.ok());
    MoeLayerTimings timings;
    runner.set_moe_timings(&timings);  // kept across set_expert_workers
    ExpertMap map = ExpertMap::uniform(spec.n_layers, spec.n_experts, 0);
    for (size_t e = 0; e < spec.n_experts; ++e) map.set(0, e, 1);  // layer 0 all on worker 1
    REQUIRE(runner.set_expert_workers({&runner.cpu_worker(), second->get()}, map).ok());
    std::vector<int32_t> ids(9);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i * 131 % 2048);
    auto cache = runner.new_kv_cache();
    runtime::SequenceInput seq{cache.get(), ids, 0, runtime::LogitsWanted::kAll};
    runtime::ForwardOutput out;
    REQUIRE(runner.forward({&seq, 1}, out).ok());
    REQUIRE(timings.layers.size() == spec.n_layers);
    // The pass's worker seconds are the per-layer share times summed over the layers.
    REQUIRE(out.expert_seconds.size() == 2);
    for (size_t w = 0; w < 2; ++w) {
      const double sum =
          std::accumulate(timings.layers.begin(), timings.layers.end(), 0.0,
                          [w](double acc, const MoeLayerStats& s) { return acc + s.seconds[w]; });
      CHECK(out.expert_seconds[w] == sum);
      CHECK(out.expert_seconds[w] > 0.0);
    }
    const uint64_t pairs = ids.size() * spec.n_experts_used;
    CHECK(timings.layers[0].calls == 1);
    CHECK(timings.layers[0].tokens == ids.size());
    CHECK(timings.layers[0].pairs == std::vector<uint64_t>{0, pairs});
    CHECK(timings.layers[0].seconds[0] == 0.0);
    for (size_t l = 1; l < spec.n_layers; ++l) {
      CHECK(timings.layers[l].calls == 1);
      CHECK(timings.layers[l].pairs == std::vector<uint64_t>{pairs, 0});
    }
    runner.set_moe_timings(nullptr);
    auto fresh = runner.new_kv_cache();
    seq.cache = fresh.get();
    REQUIRE(runner.forward({&seq, 1}, out).ok());
    CHECK(timings.layers[1].calls == 1);
    // Without a sink the pass is still timed per worker.
    REQUIRE(out.expert_seconds.size() == 2);
    CHECK(out.expert_seconds[0] > 0.0);
    CHECK(out.expert_seconds[1] > 0.0);
    REQUIRE(runner.set_expert_workers({&runner.cpu_worker()}, ExpertMap()).ok());
  }
}

}  // namespace
}  // namespace tandem::experts
