// Tests of KvPool and PagedKvCache: block-table addressing, multi-block sequences, rewind, pool
// exhaustion and copy-on-write of blocks shared with a fork.
#include "engine/runtime/paged_kv_cache.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/cpu/attention.h"

namespace tandem::runtime {
namespace {

constexpr size_t kLayers = 2;
constexpr size_t kKvDim = 3;

struct Pool {
  std::unique_ptr<KvPool> pool;
  KvBlockAllocator allocator;
};

Pool make_pool(size_t blocks, size_t block_tokens) {
  const int64_t per_token = 2 * kLayers * kKvDim * sizeof(float);
  auto allocator =
      KvBlockAllocator::create({static_cast<int64_t>(blocks * block_tokens) * per_token,
                                static_cast<int64_t>(block_tokens), per_token});
  REQUIRE(allocator.ok());
  auto pool = KvPool::create(kLayers, kKvDim, block_tokens, blocks);
  REQUIRE(pool.ok());
  return Pool{std::move(pool).value(), std::move(allocator).value()};
}

// A distinct value per (layer, position, element); V is the negation.
float key_value(size_t layer, size_t pos, size_t d, float salt = 0.0f) {
  return static_cast<float>(layer * 1000 + pos * 10 + d) + salt;
}

void write_rows(KvCache& cache, size_t start, size_t n, float salt = 0.0f) {
  for (size_t l = 0; l < kLayers; ++l) {
    std::vector<float> k(n * kKvDim);
    std::vector<float> v(n * kKvDim);
    for (size_t i = 0; i < n; ++i) {
      for (size_t d = 0; d < kKvDim; ++d) {
        k[i * kKvDim + d] = key_value(l, start + i, d, salt);
        v[i * kKvDim + d] = -key_value(l, start + i, d, salt);
      }
    }
    cache.write(l, start, k, v);
  }
}

// Reads position p's row through the cache's block view, as attention addresses it.
std::vector<float> read_row(const KvCache& cache, size_t layer, size_t p, bool values) {
  const kernels::KvBlocks kv = cache.blocks(layer, p + 1);
  REQUIRE(p / kv.block_rows < kv.table.size());
  const size_t block = static_cast<size_t>(kv.table[p / kv.block_rows]);
  REQUIRE(block < kv.n_blocks);
  const size_t dim = cache.kv_dim();
  const auto* base =
      static_cast<const uint8_t*>(values ? kv.values : kv.keys) +
      (block * kv.block_rows + p % kv.block_rows) * dim * kernels::kv_type_bytes(kv.type);
  std::vector<float> row(dim);
  kernels::load_kv_elements(kv.type, base, row.data(), dim);
  return row;
}

void check_rows(const KvCache& cache, size_t begin, size_t end, float salt = 0.0f) {
  for (size_t l = 0; l < kLayers; ++l) {
    for (size_t p = begin; p < end; ++p) {
      INFO("layer " << l << " position " << p);
      const auto k = read_row(cache, l, p, false);
      const auto v = read_row(cache, l, p, true);
      for (size_t d = 0; d < kKvDim; ++d) {
        CHECK(k[d] == key_value(l, p, d, salt));
        CHECK(v[d] == -key_value(l, p, d, salt));
      }
    }
  }
}

TEST_CASE("paged cache addresses rows through the allocator's block table", "[kv][paged]") {
  Pool p = make_pool(8, 4);
  // Another sequence takes the first blocks, so this one's table is not 0, 1, 2.
  REQUIRE(p.allocator.grow(99, 5).ok());
  PagedKvCache cache(*p.pool, p.allocator, 7, 64);
  REQUIRE(cache.prepare_write(0, 10).ok());
  const auto table = p.allocator.block_table(7);
  REQUIRE(table.size() == 3);  // ceil(10 / 4)
  CHECK(std::vector<BlockId>(cache.block_table().begin(), cache.block_table().end()) ==
        std::vector<BlockId>(table.begin(), table.end()));
  for (BlockId b : table) CHECK(b >= 2);  // blocks 0 and 1 belong to sequence 99
  CHECK(cache.prepared() == 12);

  // Chunks that straddle block boundaries.
  write_rows(cache, 0, 3);
  write_rows(cache, 3, 6);
  write_rows(cache, 9, 1);
  cache.set_length(10);
  CHECK(cache.length() == 10);
  check_rows(cache, 0, 10);

  // The pool layout: per layer all K blocks, then all V blocks; block b at b * 4 * kv_dim.
  for (size_t l = 0; l < kLayers; ++l) {
    for (size_t pos = 0; pos < 10; ++pos) {
      const size_t off = (static_cast<size_t>(table[pos / 4]) * 4 + pos % 4) * kKvDim;
      CHECK(reinterpret_cast<const float*>(p.pool->layer_keys(l))[off + 1] == key_value(l, pos, 1));
      CHECK(reinterpret_cast<const float*>(p.pool->layer_values(l))[off + 2] ==
            -key_value(l, pos, 2));
    }
  }
  CHECK(p.pool->bytes() == 8 * 4 * kKvDim * 2 * kLayers * sizeof(float));
}

TEST_CASE("attention over a paged cache is bit-identical to the contiguous cache", "[kv][paged]") {
  // One kv head of dim 3 (= kKvDim), three query heads sharing it.
  kernels::AttentionConfig cfg;
  cfg.n_heads = 3;
  cfg.n_kv_heads = 1;
  cfg.head_dim = kKvDim;
  cfg.scale = 0.577f;
  for (size_t bt : {size_t{1}, size_t{3}, size_t{4}, size_t{16}}) {
    INFO("block tokens " << bt);
    Pool p = make_pool(40, bt);
    REQUIRE(p.allocator.grow(1, 3).ok());  // scatter: the sequence's blocks do not start at 0
    PagedKvCache paged(*p.pool, p.allocator, 2, 64);
    DenseKvCache dense(kLayers, kKvDim, 64);
    const size_t n = 23;
    REQUIRE(paged.prepare_write(0, n).ok());
    REQUIRE(dense.prepare_write(0, n).ok());
    std::vector<float> k(n * kKvDim), v(n * kKvDim), q(5 * 3 * kKvDim);
    for (size_t i = 0; i < k.size(); ++i) {
      k[i] = std::sin(0.37f * static_cast<float>(i));
      v[i] = std::cos(0.91f * static_cast<float>(i));
    }
    for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(1.3f * static_cast<float>(i) + 0.2f);
    paged.write(1, 0, k, v);
    dense.write(1, 0, k, v);
    std::vector<float> out_paged(q.size()), out_dense(q.size()), out_span(q.size());
    kernels::attention_heads(q, 5, n - 5, paged.blocks(1, n), cfg, out_paged, 0, 3);
    kernels::attention_heads(q, 5, n - 5, dense.blocks(1, n), cfg, out_dense, 0, 3);
    kernels::attention(q, 5, n - 5, k, v, cfg, out_span);
    CHECK(out_paged == out_dense);
    CHECK(out_paged == out_span);
  }
}

TEST_CASE("set_length rewinds a paged cache; rewritten rows replace the tail", "[kv][paged]") {
  Pool p = make_pool(8, 4);
  PagedKvCache cache(*p.pool, p.allocator, 1, 32);
  REQUIRE(cache.prepare_write(0, 10).ok());
  write_rows(cache, 0, 10);
  cache.set_length(10);
  const int64_t free_before = p.allocator.free_blocks();
  cache.set_length(5);
  CHECK(cache.length() == 5);
  REQUIRE(cache.prepare_write(5, 7).ok());
  CHECK(p.allocator.free_blocks() == free_before);  // the blocks were kept: no new ones taken
  write_rows(cache, 5, 2, 0.5f);
  cache.set_length(7);
  check_rows(cache, 0, 5);
  check_rows(cache, 5, 7, 0.5f);
  // Growing past the old end takes blocks again only beyond what the table covers.
  REQUIRE(cache.prepare_write(7, 13).ok());
  CHECK(p.allocator.free_blocks() == free_before - 1);
  CHECK(cache.block_table().size() == 4);
}

TEST_CASE("paged caches fail cleanly when the pool or the context runs out", "[kv][paged]") {
  Pool p = make_pool(4, 4);
  auto a = std::make_unique<PagedKvCache>(*p.pool, p.allocator, 1, 100);
  REQUIRE(a->prepare_write(0, 12).ok());  // 3 of 4 blocks
  PagedKvCache b(*p.pool, p.allocator, 2, 100);
  const Status full = b.prepare_write(0, 8);
  CHECK(full.code() == StatusCode::kResourceExhausted);
  CHECK(b.block_table().empty());
  CHECK(p.allocator.free_blocks() == 1);  // all or nothing
  CHECK(b.prepare_write(0, 101).code() == StatusCode::kOutOfRange);
  CHECK(b.prepare_write(0, 4).ok());  // the last block still serves
  a.reset();                          // destroying a cache frees its blocks
  CHECK(p.allocator.free_blocks() == 3);
  REQUIRE(b.prepare_write(4, 16).ok());
  CHECK(b.block_table().size() == 4);
  CHECK(p.allocator.check_invariants().ok());

  CHECK(KvPool::create(0, 3, 4, 4).status().code() == StatusCode::kInvalidArgument);
  CHECK(KvPool::create(2, 3, 4, 0).status().code() == StatusCode::kInvalidArgument);
  const size_t huge = std::numeric_limits<size_t>::max() / 4;
  CHECK(KvPool::create(2, 3, huge, 4).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("a fork shares blocks; writes copy the shared partial block first", "[kv][paged]") {
  Pool p = make_pool(8, 4);
  auto parent = std::make_unique<PagedKvCache>(*p.pool, p.allocator, 1, 32);
  REQUIRE(parent->prepare_write(0, 6).ok());
  write_rows(*parent, 0, 6);
  parent->set_length(6);
  REQUIRE(p.allocator.fork(1, 2).ok());
  PagedKvCache child(*p.pool, p.allocator, 2, 32);
  CHECK(child.length() == 0);
  child.set_length(6);
  check_rows(child, 0, 6);  // adopted the parent's rows
  const BlockId shared_partial = parent->block_table()[1];
  CHECK(p.allocator.ref_count(shared_partial) == 2);

  // Rewriting inside a shared full block is refused; nothing changes.
  const int64_t free_before = p.allocator.free_blocks();
  CHECK(child.prepare_write(2, 7).code() == StatusCode::kFailedPrecondition);
  CHECK(p.allocator.free_blocks() == free_before);

  // Appending copies the shared partial block (rows 4, 5 come along) and writes the copy.
  REQUIRE(child.prepare_write(6, 7).ok());
  CHECK(child.block_table()[0] == parent->block_table()[0]);
  CHECK(child.block_table()[1] != shared_partial);
  write_rows(child, 6, 1, 0.25f);
  child.set_length(7);
  check_rows(child, 0, 6);
  check_rows(child, 6, 7, 0.25f);
  // The parent's block is untouched and private again; it may now write in place.
  CHECK(p.allocator.ref_count(shared_partial) == 1);
  REQUIRE(parent->prepare_write(6, 7).ok());
  CHECK(parent->block_table()[1] == shared_partial);
  write_rows(*parent, 6, 1, 0.75f);
  check_rows(*parent, 0, 6);
  check_rows(*parent, 6, 7, 0.75f);
  check_rows(child, 6, 7, 0.25f);
  parent.reset();
  CHECK(p.allocator.ref_count(child.block_table()[0]) == 1);
  CHECK(p.allocator.check_invariants().ok());
}

}  // namespace
}  // namespace tandem::runtime

namespace tandem::runtime {
namespace {

TEST_CASE("a keys-only pool (MLA) stores no values and views them as the keys", "[kv][paged]") {
  // Half the bytes of a K+V pool of the same shape, in the pool and in the allocator's budget.
  auto both = KvPool::create(2, 5, 4, 3);
  auto keys_only = KvPool::create(2, 5, 4, 3, /*keys_only=*/true);
  REQUIRE(both.ok());
  REQUIRE(keys_only.ok());
  CHECK(keys_only.value()->bytes() * 2 == both.value()->bytes());
  CHECK(kv_bytes_per_token(2, 1, 5, 4, /*keys_only=*/true).value() * 2 ==
        kv_bytes_per_token(2, 1, 5, 4).value());
  KvPool& pool = *keys_only.value();
  auto allocator = make_allocator_for(pool);
  REQUIRE(allocator.ok());
  CHECK(allocator->total_blocks() == 3);
  PagedKvCache cache(pool, allocator.value(), 1, 12);
  REQUIRE(cache.prepare_write(0, 6).ok());
  std::vector<float> rows(6 * 5);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i) + 0.5f;
  for (size_t layer = 0; layer < 2; ++layer) cache.write(layer, 0, rows, {});
  cache.set_length(6);
  for (size_t layer = 0; layer < 2; ++layer) {
    const kernels::KvBlocks view = cache.blocks(layer, 6);
    CHECK(view.values == view.keys);
    for (size_t p = 0; p < 6; ++p) {
      const float* row = static_cast<const float*>(view.keys) +
                         (static_cast<size_t>(view.table[p / 4]) * 4 + p % 4) * 5;
      CHECK(std::vector<float>(row, row + 5) ==
            std::vector<float>(rows.begin() + static_cast<ptrdiff_t>(p * 5),
                               rows.begin() + static_cast<ptrdiff_t>(p * 5 + 5)));
    }
  }
  // A copy-on-write copy moves the key plane only (there is no other).
  const BlockId spare = 3 - cache.block_table()[0] - cache.block_table()[1];  // ids 0 + 1 + 2
  REQUIRE(pool.copy_block(cache.block_table()[0], spare).ok());
  CHECK(reinterpret_cast<const float*>(pool.layer_keys(1))[static_cast<size_t>(spare) * 4 * 5] ==
        rows[0]);
  DenseKvCache dense(2, 5, 8, /*keys_only=*/true);
  REQUIRE(dense.prepare_write(0, 6).ok());
  dense.write(0, 0, rows, {});
  CHECK(dense.blocks(0, 6).values == dense.blocks(0, 6).keys);
  CHECK(dense.allocated_bytes() == 2 * 8 * 5 * sizeof(float));  // keys only, 8 rows (the limit)
}

TEST_CASE("f16 pools and dense caches store rows rounded to halves, in half the bytes",
          "[kv][paged]") {
  auto half = KvPool::create(2, 5, 4, 3, false, kernels::KvType::kF16);
  auto full = KvPool::create(2, 5, 4, 3);
  REQUIRE(half.ok());
  REQUIRE(full.ok());
  CHECK((*half)->bytes() * 2 == (*full)->bytes());
  CHECK(kv_bytes_per_token(2, 1, 5, 2).value() * 2 == kv_bytes_per_token(2, 1, 5, 4).value());
  auto allocator = make_allocator_for(**half);
  REQUIRE(allocator.ok());
  PagedKvCache paged(**half, *allocator, 1, 64);
  DenseKvCache dense(2, 5, 64, false, kernels::KvType::kF16);
  DenseKvCache dense32(2, 5, 64);
  std::vector<float> k(6 * 5), v(6 * 5);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = 0.1f * static_cast<float>(i) + 1e-4f;
    v[i] = -3.3f * static_cast<float>(i);
  }
  std::vector<uint16_t> bits(k.size());
  std::vector<float> k16(k.size()), v16(v.size());
  kernels::store_kv_elements(kernels::KvType::kF16, k.data(), bits.data(), k.size());
  kernels::load_kv_elements(kernels::KvType::kF16, bits.data(), k16.data(), k.size());
  kernels::store_kv_elements(kernels::KvType::kF16, v.data(), bits.data(), v.size());
  kernels::load_kv_elements(kernels::KvType::kF16, bits.data(), v16.data(), v.size());
  REQUIRE(k16 != k);
  for (KvCache* cache : std::initializer_list<KvCache*>{&paged, &dense, &dense32}) {
    REQUIRE(cache->prepare_write(0, 6).ok());
    for (size_t layer = 0; layer < 2; ++layer) cache->write(layer, 0, k, v);
    cache->set_length(6);
  }
  for (size_t layer = 0; layer < 2; ++layer) {
    for (size_t p = 0; p < 6; ++p) {
      INFO("layer " << layer << " position " << p);
      const auto at = [p](const std::vector<float>& x) {
        return std::vector<float>(x.begin() + static_cast<ptrdiff_t>(p * 5),
                                  x.begin() + static_cast<ptrdiff_t>(p * 5 + 5));
      };
      CHECK(read_row(paged, layer, p, false) == at(k16));
      CHECK(read_row(paged, layer, p, true) == at(v16));
      CHECK(read_row(dense, layer, p, false) == at(k16));
      CHECK(read_row(dense, layer, p, true) == at(v16));
      CHECK(read_row(dense32, layer, p, false) == at(k));
    }
  }
  CHECK(dense.allocated_bytes() * 2 == dense32.allocated_bytes());
}

}  // namespace
}  // namespace tandem::runtime
