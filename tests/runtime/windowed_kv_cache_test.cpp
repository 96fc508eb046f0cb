// WindowedKvCache: gpt-oss's sliding-window layers kept in a bounded ring give the logits of a
// cache that keeps every position; rewinds within the window work, beyond it they are refused.
#include <catch2/catch.hpp>

#include "engine/runtime/windowed_kv_cache.h"
#include "tests/runtime/runtime_fixture.h"

namespace tandem::runtime::testing {
namespace {

std::string gpt_oss_gguf() {
  return std::string(TANDEM_SHARED_DIR) + "/data/tiny-gpt-oss/tiny-gpt-oss-all-f32.gguf";
}

// Prefill `ids`, then `steps` decode steps feeding back the argmax; every step's logits.
std::vector<std::vector<float>> decode(ModelRunner& runner, KvCache& cache,
                                       const std::vector<int32_t>& ids, size_t steps) {
  std::vector<std::vector<float>> rows;
  ForwardOutput out;
  SequenceInput seq{&cache, ids, 0, LogitsWanted::kLast};
  REQUIRE(runner.forward({&seq, 1}, out).ok());
  for (size_t s = 0; s < steps; ++s) {
    const std::span<const float> row = out.row(0, 0);
    rows.emplace_back(row.begin(), row.end());
    std::vector<int32_t> one{argmax(row)};
    SequenceInput step{&cache, one, cache.length(), LogitsWanted::kLast};
    REQUIRE(runner.forward({&step, 1}, out).ok());
  }
  return rows;
}

TEST_CASE("layout of gpt-oss: even layers windowed, odd layers in the full cache",
          "[runtime][windowed_kv]") {
  auto model = load_model(gpt_oss_gguf());
  const KvLayerLayout& layout = model->runner->kv_layout();
  CHECK(layout.slot == std::vector<int32_t>{-1, 0, -1, 1});
  CHECK(layout.n_full == 2);
  CHECK(layout.window == 8);
  // window - 1 + pass tokens, in 16-row blocks, plus one block.
  CHECK(window_ring_positions(8, 1, 16) == 32);
  CHECK(window_ring_positions(8, 100, 16) == 128);
  CHECK(window_ring_bytes(layout, 32, 1, 16) == 2 * 32 * 32 * 2 * 4);
}

TEST_CASE("windowed ring: logits bit-identical to a cache of every position, memory bounded",
          "[runtime][windowed_kv]") {
  auto model = load_model(gpt_oss_gguf());
  ModelRunner& runner = *model->runner;
  const model::ModelSpec& spec = runner.spec();
  const std::vector<int32_t> ids = {5, 17, 300, 42, 7, 1999, 64, 8, 11, 250, 3, 77};
  // Ring blocks: the prefill needs its 12 positions at once, decode at most the window's 8 (and
  // the block straddling it): 12 one-row blocks, 4 of 3 rows (8 positions from mid-block), 2 of 16.
  for (auto [block_rows, ring_blocks] :
       {std::pair{size_t{1}, size_t{12}}, std::pair{size_t{3}, size_t{4}},
        std::pair{size_t{16}, size_t{2}}}) {
    INFO("ring block rows " << block_rows);
    DenseKvCache every(spec.n_layers, spec.kv_dim(), 256);  // windows applied by the mask only
    WindowedKvCache ring(std::make_unique<DenseKvCache>(2, spec.kv_dim(), 256), runner.kv_layout(),
                         spec.kv_dim(), 256, block_rows);
    const auto want = decode(runner, every, ids, 60);
    const auto got = decode(runner, ring, ids, 60);
    CHECK(got == want);
    CHECK(ring.ring_blocks() == ring_blocks);  // 72 positions written
    CHECK(ring.ring_bytes() < every.allocated_bytes() / 2);
  }
}

TEST_CASE("windowed ring: a rewind inside the window recomputes, beyond it is refused",
          "[runtime][windowed_kv]") {
  auto model = load_model(gpt_oss_gguf());
  ModelRunner& runner = *model->runner;
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 40; ++i) ids.push_back((i * 37 + 11) % 2000);
  auto cache = runner.new_kv_cache(128);
  REQUIRE(dynamic_cast<WindowedKvCache*>(cache.get()) != nullptr);
  const std::vector<float> all = prefill_all(runner, ids, *cache);
  const size_t vocab = runner.n_vocab();

  // Re-run the last 3 positions: their windows (positions 30..39) are still in the ring.
  ForwardOutput out;
  SequenceInput again{cache.get(), std::span<const int32_t>(ids).last(3), 37, LogitsWanted::kAll};
  REQUIRE(runner.forward({&again, 1}, out).ok());
  CHECK(std::vector<float>(out.logits.begin(), out.logits.end()) ==
        std::vector<float>(all.begin() + 37 * vocab, all.end()));

  // 30 more positions: the ring (3 blocks of 16 after the 40-token prefill) wraps over block 0.
  for (int32_t i = 0; i < 30; ++i) {
    std::vector<int32_t> one{i + 100};
    SequenceInput step{cache.get(), one, cache->length(), LogitsWanted::kLast};
    REQUIRE(runner.forward({&step, 1}, out).ok());
  }
  // Rewinding to position 5 needs positions from 0, overwritten: refused, nothing changed.
  const size_t length = cache->length();
  const Status rewind = cache->prepare_write(5, 6);
  CHECK(rewind.code() == StatusCode::kFailedPrecondition);
  CHECK(rewind.message().find("sliding-window") != std::string::npos);
  CHECK(cache->length() == length);
}

}  // namespace
}  // namespace tandem::runtime::testing
