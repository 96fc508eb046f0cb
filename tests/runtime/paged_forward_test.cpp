// Forward passes over paged KV caches against llama.cpp's tiny-moe references, for several block
// sizes, and bit-identity with the dense (contiguous) cache.
#include <catch2/catch.hpp>

#include "engine/runtime/paged_kv_cache.h"
#include "tests/runtime/paged_pool.h"
#include "tests/runtime/runtime_fixture.h"

namespace tandem::runtime::testing {
namespace {

TEST_CASE("paged forward reproduces llama.cpp tiny-moe logits for block sizes 1, 3, 16",
          "[runtime][forward][paged]") {
  const std::string dir = tiny_moe_dir();
  const auto ref = read_json(dir + "ref-f32.json");
  auto model = load_model(dir + "tiny-moe-f32.gguf");
  ModelRunner& runner = *model->runner;
  const size_t vocab = runner.n_vocab();
  for (size_t bt : {size_t{1}, size_t{3}, size_t{16}}) {
    // Enough blocks for one prompt + its greedy tokens, plus a neighbour taking the low ids.
    PagedPool p = make_pool(runner, bt, 512 / bt + 8);
    SeqId next_seq = 1;
    for (const auto& pr : ref["prompts"]) {
      const std::string name = pr["name"];
      INFO("block tokens " << bt << ", prompt " << name);
      const auto ids = pr["tokens"].get<std::vector<int32_t>>();
      const auto want_tokens = pr["greedy_tokens"].get<std::vector<int32_t>>();
      const auto expected = read_f32(dir + pr["prompt_logits_file"].get<std::string>());
      const auto expected_greedy = read_f32(dir + pr["greedy_logits_file"].get<std::string>());

      // A neighbour that holds a block, so this sequence's table is not 0, 1, 2, ...
      PagedKvCache neighbour(*p.pool, *p.allocator, next_seq++, 64);
      REQUIRE(neighbour.prepare_write(0, 1).ok());
      PagedKvCache paged(*p.pool, *p.allocator, next_seq++, 256);
      const auto logits = prefill_all(runner, ids, paged);
      REQUIRE(logits.size() == expected.size());
      CHECK(max_abs_diff(logits, expected) < 1e-4f);
      CHECK(paged.block_table().size() == (ids.size() + bt - 1) / bt);
      auto dense = runner.new_kv_cache();
      CHECK(prefill_all(runner, ids, *dense) == logits);  // bit-identical to the dense path

      // Greedy decode through the paged cache: each step's logits and token.
      ForwardOutput out;
      SequenceInput last{&paged, std::span<const int32_t>(ids).last(1), ids.size() - 1,
                         LogitsWanted::kLast};
      REQUIRE(runner.forward({&last, 1}, out).ok());  // rewinds one position, same logits
      for (size_t s = 0; s < want_tokens.size(); ++s) {
        INFO("step " << s);
        CHECK(max_abs_diff(out.row(0, 0),
                           std::span<const float>(expected_greedy).subspan(s * vocab, vocab)) <
              1e-4f);
        CHECK(argmax(out.row(0, 0)) == want_tokens[s]);
        std::vector<int32_t> one{want_tokens[s]};
        SequenceInput step{&paged, one, paged.length(), LogitsWanted::kLast};
        REQUIRE(runner.forward({&step, 1}, out).ok());
      }
      CHECK(p.allocator->check_invariants().ok());
    }
    CHECK(p.allocator->free_blocks() == p.allocator->total_blocks());  // every cache freed
  }
}

TEST_CASE("a batch of paged and dense caches gives each sequence its solo logits",
          "[runtime][forward][paged]") {
  const std::string dir = tiny_moe_dir();
  const auto ref = read_json(dir + "ref-f32.json");
  auto model = load_model(dir + "tiny-moe-f32.gguf", 3);
  ModelRunner& runner = *model->runner;
  PagedPool p = make_pool(runner, 3, 200);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& pr : ref["prompts"]) prompts.push_back(pr["tokens"].get<std::vector<int32_t>>());
  REQUIRE(prompts.size() == 3);

  // Solo, dense.
  std::vector<std::vector<float>> solo;
  for (const auto& ids : prompts) {
    auto cache = runner.new_kv_cache();
    solo.push_back(prefill_all(runner, ids, *cache));
  }
  // Together: two paged caches (chunked prefill for the first) and one dense.
  PagedKvCache c0(*p.pool, *p.allocator, 1, 256);
  PagedKvCache c1(*p.pool, *p.allocator, 2, 256);
  auto c2 = runner.new_kv_cache();
  const size_t half = prompts[0].size() / 2;
  {
    SequenceInput first{&c0, std::span<const int32_t>(prompts[0]).first(half), 0,
                        LogitsWanted::kAll};
    ForwardOutput out;
    REQUIRE(runner.forward({&first, 1}, out).ok());
  }
  std::vector<SequenceInput> batch{
      {&c0, std::span<const int32_t>(prompts[0]).subspan(half), half, LogitsWanted::kAll},
      {&c1, prompts[1], 0, LogitsWanted::kAll},
      {c2.get(), prompts[2], 0, LogitsWanted::kAll}};
  ForwardOutput out;
  REQUIRE(runner.forward(batch, out).ok());
  const size_t vocab = runner.n_vocab();
  for (size_t i = half; i < prompts[0].size(); ++i) {
    INFO("chunked row " << i);
    // Chunked prefill: within 1e-5 of the whole prefill (the matmul batch differs).
    CHECK(max_abs_diff(out.row(0, i - half),
                       std::span<const float>(solo[0]).subspan(i * vocab, vocab)) < 1e-5f);
  }
  for (size_t s = 1; s < 3; ++s) {
    for (size_t i = 0; i < prompts[s].size(); ++i) {
      INFO("sequence " << s << " row " << i);
      const auto want = std::span<const float>(solo[s]).subspan(i * vocab, vocab);
      const auto got = out.row(s, i);
      CHECK(std::equal(got.begin(), got.end(), want.begin(), want.end()));
    }
  }
}

TEST_CASE("gpt-oss sliding-window layers through paged caches: block sizes and chunked prefill",
          "[runtime][forward][paged][gpt-oss]") {
  // The window (8) is smaller than the prompts (52-56 tokens), so windowed layers read only the
  // last blocks of each table; chunked prefill splits a window across two passes.
  const std::string dir = std::string(TANDEM_SHARED_DIR) + "/data/tiny-gpt-oss/";
  const auto ref = read_json(dir + "ref-all-f32.json");
  auto model = load_model(dir + "tiny-gpt-oss-all-f32.gguf");
  ModelRunner& runner = *model->runner;
  for (size_t bt : {size_t{1}, size_t{3}, size_t{16}}) {
    PagedPool p = make_pool(runner, bt, 256 / bt + 8);
    SeqId next_seq = 1;
    for (const auto& pr : ref["prompts"]) {
      INFO("block tokens " << bt << ", prompt " << pr["name"].get<std::string>());
      const auto ids = pr["tokens"].get<std::vector<int32_t>>();
      auto dense = runner.new_kv_cache();
      const std::vector<float> want = prefill_all(runner, ids, *dense);
      PagedKvCache paged(*p.pool, *p.allocator, next_seq++, 256);
      CHECK(prefill_all(runner, ids, paged) == want);  // bit-identical to the dense cache

      // Chunked: 21 tokens, then the rest (logits for every position of both chunks).
      PagedKvCache chunked(*p.pool, *p.allocator, next_seq++, 256);
      const size_t split = 21;
      std::vector<float> got;
      ForwardOutput out;
      for (auto [begin, end] : {std::pair{size_t{0}, split}, std::pair{split, ids.size()}}) {
        SequenceInput in{&chunked, std::span<const int32_t>(ids).subspan(begin, end - begin), begin,
                         LogitsWanted::kAll};
        REQUIRE(runner.forward({&in, 1}, out).ok());
        got.insert(got.end(), out.logits.begin(), out.logits.end());
      }
      CHECK(got == want);
      CHECK(p.allocator->check_invariants().ok());
    }
  }
}

TEST_CASE("f16 KV caches: paged and dense give the same bits, in half the bytes",
          "[runtime][forward][paged][kv]") {
  const std::string dir = tiny_moe_dir();
  const auto ref = read_json(dir + "ref-f32.json");
  auto model = load_model(dir + "tiny-moe-f32.gguf", 2, true, true, kernels::KvType::kF16);
  ModelRunner& runner = *model->runner;
  auto f32_model = load_model(dir + "tiny-moe-f32.gguf");
  const auto ids = ref["prompts"][0]["tokens"].get<std::vector<int32_t>>();
  for (size_t bt : {size_t{1}, size_t{5}, size_t{16}}) {
    INFO("block tokens " << bt);
    PagedPool p = make_pool(runner, bt, 512 / bt + 8);
    PagedPool p32 = make_pool(*f32_model->runner, bt, 512 / bt + 8);
    CHECK(p.pool->type() == kernels::KvType::kF16);
    CHECK(p.pool->bytes() * 2 == p32.pool->bytes());
    PagedKvCache paged(*p.pool, *p.allocator, 1, 256);
    const auto logits = prefill_all(runner, ids, paged);
    auto dense = runner.new_kv_cache();
    CHECK(prefill_all(runner, ids, *dense) == logits);
    // Decode steps through both agree too.
    ForwardOutput a, b;
    for (int32_t token : {7, 300, 1200}) {
      std::vector<int32_t> one{token};
      SequenceInput sp{&paged, one, paged.length(), LogitsWanted::kLast};
      SequenceInput sd{dense.get(), one, dense->length(), LogitsWanted::kLast};
      REQUIRE(runner.forward({&sp, 1}, a).ok());
      REQUIRE(runner.forward({&sd, 1}, b).ok());
      CHECK(std::vector<float>(a.row(0, 0).begin(), a.row(0, 0).end()) ==
            std::vector<float>(b.row(0, 0).begin(), b.row(0, 0).end()));
    }
    // And they are not the f32 cache's logits (the rounding is really there).
    auto f32_cache = f32_model->runner->new_kv_cache();
    CHECK(prefill_all(*f32_model->runner, ids, *f32_cache) != logits);
  }
}

}  // namespace
}  // namespace tandem::runtime::testing
