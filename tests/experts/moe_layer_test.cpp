// MoeLayer: splitting experts across two CPU workers by any placement gives bit-identical results.
#include <catch2/catch.hpp>
#include <cmath>

#include <random>
#include <set>
#include <thread>

#include "engine/experts/experts.h"
#include "tests/runtime/runtime_fixture.h"

namespace tandem::experts {
namespace {

using runtime::testing::load_model;
using runtime::testing::tiny_moe_dir;

// Delegates to a CPU worker and records which (layer, expert) it was asked to compute, and on
// which threads.
class RecordingWorker final : public ExpertWorker {
 public:
  explicit RecordingWorker(ExpertWorker* inner) : inner_(inner) {}
  std::string_view name() const override { return "recording"; }
  Status run(const ExpertJob& job) override {
    for (int32_t e : job.groups->expert_ids) seen.insert({job.layer, e});
    threads.insert(std::this_thread::get_id());
    return inner_->run(job);
  }
  const ThreadPool* thread_pool() const override { return inner_->thread_pool(); }
  std::set<std::pair<size_t, int32_t>> seen;
  std::set<std::thread::id> threads;

 private:
  ExpertWorker* inner_;
};

enum class Placement { kNone, kAll, kOneLayerAll, kRandom };

ExpertMap make_map(Placement p, size_t n_layers, size_t n_experts, uint32_t seed) {
  ExpertMap map = ExpertMap::uniform(n_layers, n_experts, 0);
  std::mt19937 rng(seed);
  for (size_t l = 0; l < n_layers; ++l) {
    for (size_t e = 0; e < n_experts; ++e) {
      bool second = false;
      switch (p) {
        case Placement::kNone:
          second = false;
          break;
        case Placement::kAll:
          second = true;
          break;
        case Placement::kOneLayerAll:
          second = l == 1;
          break;
        case Placement::kRandom:
          second = (rng() & 1) != 0;
          break;
      }
      map.set(l, e, second ? 1 : 0);
    }
  }
  return map;
}

TEST_CASE("route: softmax, top-k by probability, optional renormalisation", "[experts]") {
  // Logits log(p) for p = {0.1, 0.4, 0.2, 0.3}: softmax gives p back.
  std::vector<float> logits = {std::log(0.1f), std::log(0.4f), std::log(0.2f), std::log(0.3f)};
  std::vector<float> copy = logits;
  Routing r;
  route(logits, 1, 4, 2, RouterRecipe{}, r);
  CHECK(r.experts == std::vector<int32_t>{1, 3});
  CHECK(r.weights[0] == Approx(0.4f));
  CHECK(r.weights[1] == Approx(0.3f));
  route(copy, 1, 4, 2, RouterRecipe{.renormalize = true}, r);
  CHECK(r.weights[0] == Approx(0.4f / 0.7f));
  CHECK(r.weights[1] == Approx(0.3f / 0.7f));
}

TEST_CASE("route: GPT-OSS top-k over raw logits, then softmax over the k selected", "[experts]") {
  // Two tokens; the second has a tie (lower expert id first).
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.0f, 3.0f, 0.0f, 3.0f, -2.0f};
  Routing r;
  route(logits, 2, 4, 2, RouterRecipe{.policy = model::RoutingPolicy::kTopKSoftmax}, r);
  CHECK(r.experts == std::vector<int32_t>{1, 3, 0, 2});
  // softmax({2, 1}) and softmax({3, 3}), in double.
  const double e = std::exp(-1.0);
  CHECK(r.weights[0] == Approx(1.0 / (1.0 + e)).epsilon(1e-6));
  CHECK(r.weights[1] == Approx(e / (1.0 + e)).epsilon(1e-6));
  CHECK(r.weights[2] == Approx(0.5).epsilon(1e-6));
  CHECK(r.weights[3] == Approx(0.5).epsilon(1e-6));
}

TEST_CASE("group_by_expert lists pairs per expert in token order, filtered by owner", "[experts]") {
  Routing r;
  r.n_tokens = 3;
  r.k = 2;
  r.experts = {2, 0, 0, 3, 2, 3};
  r.weights.assign(6, 0.5f);
  ExpertGroups g;
  group_by_expert(r, 4, {}, 0, g);
  CHECK(g.expert_ids == std::vector<int32_t>{0, 2, 3});
  CHECK(g.offsets == std::vector<size_t>{0, 2, 4, 6});
  CHECK(g.pairs == std::vector<uint32_t>{1, 2, 0, 4, 3, 5});
  const std::vector<uint8_t> owner = {0, 1, 1, 0};
  group_by_expert(r, 4, owner, 1, g);
  CHECK(g.expert_ids == std::vector<int32_t>{2});
  CHECK(g.pairs == std::vector<uint32_t>{0, 4});
}

TEST_CASE("two CPU workers with any placement give bit-identical logits", "[experts]") {
  // own_pool: the second worker has its own ThreadPool and runs on the MoeLayer's helper thread
  // beside the first; otherwise it shares the runner's pool and runs after it on the caller.
  for (const bool own_pool : {true, false})
    for (const char* variant : {"f32", "q8_0"}) {
      auto model = load_model(tiny_moe_dir() + "tiny-moe-" + variant + ".gguf", 2);
      runtime::ModelRunner& runner = *model->runner;
      const auto& spec = runner.spec();
      const auto ref = runtime::testing::read_json(tiny_moe_dir() + "ref-f32.json");
      const auto ids = ref["prompts"][2]["tokens"].get<std::vector<int32_t>>();

      auto baseline_cache = runner.new_kv_cache();
      const auto baseline = runtime::testing::prefill_all(runner, ids, *baseline_cache);

      ThreadPool second_pool(2);
      auto second = CpuExpertWorker::create(spec, *model->checkpoint.weights,
                                            own_pool ? &second_pool : &runner.pool(),
                                            kernels::MatmulActivations::kQuantized);
      REQUIRE(second.ok());
      RecordingWorker w0(&runner.cpu_worker());
      RecordingWorker w1(second->get());
      for (Placement p :
           {Placement::kNone, Placement::kAll, Placement::kOneLayerAll, Placement::kRandom}) {
        for (uint32_t seed : {1u, 2u, 3u}) {
          INFO(variant << " own pool " << own_pool << " placement " << static_cast<int>(p)
                       << " seed " << seed);
          w0.seen.clear();
          w1.seen.clear();
          w0.threads.clear();
          w1.threads.clear();
          const ExpertMap map = make_map(p, spec.n_layers, spec.n_experts, seed);
          REQUIRE(runner.set_expert_workers({&w0, &w1}, map).ok());
          auto cache = runner.new_kv_cache();
          const auto logits = runtime::testing::prefill_all(runner, ids, *cache);
          CHECK(logits == baseline);
          // Each worker computed exactly the experts the map gives it.
          for (const auto& [layer, e] : w0.seen) CHECK(map.worker(layer, e) == 0);
          for (const auto& [layer, e] : w1.seen) CHECK(map.worker(layer, e) == 1);
          CHECK(w0.seen.size() + w1.seen.size() > 0);
          if (p == Placement::kNone) CHECK(w1.seen.empty());
          if (p == Placement::kAll) CHECK(w0.seen.empty());
          if (p == Placement::kRandom) {
            CHECK(!w0.seen.empty());
            CHECK(!w1.seen.empty());
          }
          // Worker 0 always runs on the forward pass's thread; worker 1 on one persistent helper
          // thread with its own pool, on the forward pass's thread with a shared one.
          const std::set<std::thread::id> caller = {std::this_thread::get_id()};
          if (!w0.seen.empty()) CHECK(w0.threads == caller);
          if (!w1.seen.empty()) {
            REQUIRE(w1.threads.size() == 1);
            CHECK((*w1.threads.begin() == std::this_thread::get_id()) == !own_pool);
          }
        }
      }
      REQUIRE(runner.set_expert_workers({&runner.cpu_worker()}, ExpertMap()).ok());
    }
}

TEST_CASE("an expert map naming a missing worker is refused", "[experts]") {
  auto model = load_model(tiny_moe_dir() + "tiny-moe-f32.gguf", 1);
  runtime::ModelRunner& runner = *model->runner;
  const auto& spec = runner.spec();
  ExpertMap map = ExpertMap::uniform(spec.n_layers, spec.n_experts, 0);
  map.set(0, 3, 1);
  REQUIRE(runner.set_expert_workers({&runner.cpu_worker()}, map).ok());
  auto cache = runner.new_kv_cache();
  std::vector<int32_t> ids(16);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i * 97 % 2048);
  runtime::SequenceInput seq{cache.get(), ids, 0, runtime::LogitsWanted::kLast};
  runtime::ForwardOutput out;
  CHECK(runner.forward({&seq, 1}, out).code() == StatusCode::kInvalidArgument);
  CHECK(runner.set_expert_workers({}, ExpertMap()).code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::experts
