// Forward-pass batching: chunked prefill, mixed batches, thread counts, routing output, errors.
#include <catch2/catch.hpp>

#include "tests/runtime/runtime_fixture.h"

namespace tandem::runtime::testing {
namespace {

std::vector<int32_t> prompt_tokens(const std::string& name) {
  const auto ref = read_json(tiny_moe_dir() + "ref-f32.json");
  for (const auto& p : ref["prompts"]) {
    if (p["name"] == name) return p["tokens"].get<std::vector<int32_t>>();
  }
  FAIL("no prompt " << name);
  return {};
}

TEST_CASE("chunked prefill through the append path equals one-batch prefill", "[runtime][batch]") {
  auto model = load_model(tiny_moe_dir() + "tiny-moe-q8_0.gguf");
  ModelRunner& runner = *model->runner;
  const auto ids = prompt_tokens("random64");
  auto whole_cache = runner.new_kv_cache();
  const auto whole = prefill_all(runner, ids, *whole_cache);
  const size_t vocab = runner.n_vocab();
  const std::vector<std::vector<size_t>> all_cuts = {{20, 64}, {7, 40, 64}, {1, 2, 64}};
  for (const auto& cuts : all_cuts) {
    auto cache = runner.new_kv_cache();
    std::vector<float> logits;
    size_t begin = 0;
    for (size_t end : cuts) {
      std::vector<int32_t> chunk(ids.begin() + begin, ids.begin() + end);
      SequenceInput seq{cache.get(), chunk, begin, LogitsWanted::kAll};
      ForwardOutput out;
      REQUIRE(runner.forward({&seq, 1}, out).ok());
      logits.insert(logits.end(), out.logits.begin(), out.logits.end());
      begin = end;
    }
    REQUIRE(cache->length() == ids.size());
    REQUIRE(logits.size() == ids.size() * vocab);
    CHECK(max_abs_diff(logits, whole) <= 1e-5f);
  }
}

TEST_CASE("a batch of three sequences equals running each alone, bit for bit", "[runtime][batch]") {
  // Every kernel computes a token's row from that token's inputs only (matmul rows, norms, RoPE,
  // routing, the per-expert matmuls) and attention reads only the sequence's own cache, so
  // batching changes no arithmetic: the results are identical, not just close.
  auto model = load_model(tiny_moe_dir() + "tiny-moe-f32.gguf", 3);
  ModelRunner& runner = *model->runner;
  const auto fox = prompt_tokens("fox");
  const auto chat = prompt_tokens("chat");
  const auto rnd = prompt_tokens("random64");
  // Sequence 2 is already part-way: its first 30 tokens are cached, 34 more come now.
  auto c0 = runner.new_kv_cache();
  auto c1 = runner.new_kv_cache();
  auto c2 = runner.new_kv_cache();
  std::vector<int32_t> rnd_head(rnd.begin(), rnd.begin() + 30);
  std::vector<int32_t> rnd_tail(rnd.begin() + 30, rnd.end());
  prefill_all(runner, rnd_head, *c2);
  std::vector<SequenceInput> batch = {{c0.get(), fox, 0, LogitsWanted::kAll},
                                      {c1.get(), chat, 0, LogitsWanted::kLast},
                                      {c2.get(), rnd_tail, 30, LogitsWanted::kAll}};
  ForwardOutput together;
  REQUIRE(runner.forward(batch, together).ok());
  REQUIRE(together.n_rows == std::vector<size_t>{fox.size(), 1, rnd_tail.size()});

  for (size_t s = 0; s < batch.size(); ++s) {
    auto cache = runner.new_kv_cache();
    if (s == 2) prefill_all(runner, rnd_head, *cache);
    SequenceInput alone = batch[s];
    alone.cache = cache.get();
    ForwardOutput out;
    REQUIRE(runner.forward({&alone, 1}, out).ok());
    REQUIRE(out.n_rows[0] == together.n_rows[s]);
    for (size_t i = 0; i < out.n_rows[0]; ++i) {
      const auto a = out.row(0, i);
      const auto b = together.row(s, i);
      CHECK(std::equal(a.begin(), a.end(), b.begin()));
    }
  }
  // Decode steps of all three in one batch continue correctly.
  std::vector<int32_t> t0{1}, t1{2}, t2{3};
  std::vector<SequenceInput> step = {{c0.get(), t0, c0->length(), LogitsWanted::kLast},
                                     {c1.get(), t1, c1->length(), LogitsWanted::kLast},
                                     {c2.get(), t2, c2->length(), LogitsWanted::kLast}};
  ForwardOutput stepped;
  REQUIRE(runner.forward(step, stepped).ok());
  CHECK(c2->length() == rnd.size() + 1);
  auto solo = runner.new_kv_cache();
  std::vector<int32_t> rnd_plus = rnd;
  rnd_plus.push_back(3);
  const auto all = prefill_all(runner, rnd_plus, *solo);
  const size_t vocab = runner.n_vocab();
  CHECK(max_abs_diff(stepped.row(2, 0),
                     std::span<const float>(all).subspan(rnd.size() * vocab, vocab)) <= 1e-5f);
}

TEST_CASE("results are bit-identical for any thread count", "[runtime][batch]") {
  // 64 tokens: big enough that the projections, the lm head and attention take the pooled path.
  const auto ids = prompt_tokens("random64");
  std::vector<float> first;
  for (int threads : {1, 2, 5}) {
    auto model = load_model(tiny_moe_dir() + "tiny-moe-q8_0.gguf", threads);
    auto cache = model->runner->new_kv_cache();
    const auto logits = prefill_all(*model->runner, ids, *cache);
    if (first.empty()) {
      first = logits;
    } else {
      CHECK(logits == first);
    }
  }
}

TEST_CASE("routing can be recorded per layer and token", "[runtime][batch]") {
  auto model = load_model(tiny_moe_dir() + "tiny-moe-f32.gguf");
  const auto ids = prompt_tokens("fox");
  auto cache = model->runner->new_kv_cache();
  SequenceInput seq{cache.get(), ids, 0, LogitsWanted::kLast};
  ForwardOutput out;
  ForwardOptions options;
  options.record_routing = true;
  REQUIRE(model->runner->forward({&seq, 1}, out, options).ok());
  REQUIRE(out.routing.size() == 2);
  for (const auto& r : out.routing) {
    REQUIRE(r.n_tokens == ids.size());
    REQUIRE(r.k == 2);
    for (size_t t = 0; t < r.n_tokens; ++t) {
      CHECK(r.experts[t * 2] != r.experts[t * 2 + 1]);
      CHECK(r.weights[t * 2] >= r.weights[t * 2 + 1]);
      CHECK(r.weights[t * 2] + r.weights[t * 2 + 1] == Approx(1.0f));  // norm_topk_prob
    }
  }
}

TEST_CASE("bad batches are refused without touching the caches", "[runtime][batch]") {
  auto model = load_model(tiny_moe_dir() + "tiny-moe-f32.gguf");
  ModelRunner& runner = *model->runner;
  auto cache = runner.new_kv_cache(8);
  ForwardOutput out;
  std::vector<int32_t> bad{1, 2051};
  SequenceInput s1{cache.get(), bad, 0, LogitsWanted::kLast};
  CHECK(runner.forward({&s1, 1}, out).code() == StatusCode::kInvalidArgument);
  std::vector<int32_t> nine(9, 5);
  SequenceInput s2{cache.get(), nine, 0, LogitsWanted::kLast};
  CHECK(runner.forward({&s2, 1}, out).code() == StatusCode::kOutOfRange);
  std::vector<int32_t> two{5, 6};
  SequenceInput s3{cache.get(), two, 3, LogitsWanted::kLast};
  CHECK(runner.forward({&s3, 1}, out).code() == StatusCode::kInvalidArgument);
  SequenceInput s4{cache.get(), two, 0, LogitsWanted::kLast};
  std::vector<SequenceInput> twice{s4, s4};
  CHECK(runner.forward(twice, out).code() == StatusCode::kInvalidArgument);
  CHECK(cache->length() == 0);
  CHECK(runner.forward({&s4, 1}, out).ok());
  CHECK(cache->length() == 2);
}

}  // namespace
}  // namespace tandem::runtime::testing
