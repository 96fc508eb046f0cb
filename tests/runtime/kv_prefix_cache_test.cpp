// Tests of the prefix cache in KvBlockAllocator: committing full blocks, matching a prefix chain,
// adopting cached blocks, copy-on-write of a cached block, LRU eviction and dropping the cache.
#include <catch2/catch.hpp>
#include <cstdint>
#include <numeric>
#include <vector>

#include "engine/runtime/kv_block_allocator.h"
#include "engine/runtime/kv_event_log.h"
#include "engine/runtime/paged_kv_cache.h"

namespace tandem::runtime {
namespace {

constexpr int64_t kBlock = 4;

KvBlockAllocator make_cached(int64_t blocks) {
  KvBlockConfig config;
  config.block_tokens = kBlock;
  config.bytes_per_token = 8;
  config.budget_bytes = blocks * kBlock * 8;
  config.prefix_caching = true;
  auto result = KvBlockAllocator::create(config);
  REQUIRE(result.ok());
  return std::move(result).value();
}

std::vector<TokenId> iota_tokens(size_t n, TokenId first = 100) {
  std::vector<TokenId> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Runs a sequence as the scheduler does: grow to the tokens, commit them, free it.
void run_and_free(KvBlockAllocator& kv, SeqId seq, const std::vector<TokenId>& tokens) {
  REQUIRE(kv.grow(seq, static_cast<int64_t>(tokens.size())).ok());
  kv.commit(seq, tokens);
  kv.free_sequence(seq);
}

TEST_CASE("prefix cache: full blocks stay cached after the sequence ends and match again",
          "[kv][prefix]") {
  KvBlockAllocator kv = make_cached(8);
  const auto tokens = iota_tokens(10);  // 2 full blocks + 2 tokens
  REQUIRE(kv.grow(1, 10).ok());
  const std::vector<BlockId> table(kv.block_table(1).begin(), kv.block_table(1).end());
  kv.commit(1, std::span<const TokenId>(tokens).first(7));  // KV of 7 tokens: one full block
  CHECK(kv.cached_blocks() == 1);
  kv.commit(1, tokens);
  CHECK(kv.cached_blocks() == 2);  // the partial third block is never cached
  CHECK_FALSE(kv.writable(table[0]));
  CHECK(kv.writable(table[2]));
  kv.free_sequence(1);
  CHECK(kv.free_blocks() == 8);  // cached blocks count as free
  CHECK(kv.cached_unreferenced_blocks() == 2);
  CHECK(kv.check_invariants().ok());

  // A longer sequence with the same start finds both blocks, in order.
  auto longer = tokens;
  longer.insert(longer.end(), {7, 8, 9, 10, 11});
  PrefixMatch match = kv.match_prefix(longer);
  CHECK(match.blocks == std::vector<BlockId>{table[0], table[1]});
  CHECK(match.unreferenced == 2);
  // Different first block: the second block's tokens alone never match (the chain differs).
  auto other = tokens;
  other[0] = 5;
  CHECK(kv.match_prefix(other).blocks.empty());
  // A prefix of less than a block matches nothing.
  CHECK(kv.match_prefix(std::span<const TokenId>(tokens).first(3)).blocks.empty());

  REQUIRE(kv.adopt_prefix(2, match.blocks, 8).ok());
  CHECK(kv.ref_count(table[0]) == 1);
  CHECK(kv.cached_unreferenced_blocks() == 0);
  CHECK(kv.free_blocks() == 6);
  CHECK(kv.sequence_tokens(2) == 8);
  // Growing past a block boundary needs new blocks only: the adopted ones are full.
  CHECK(kv.blocks_needed(2, 15) == 2);
  std::vector<KvBlockCopy> copies;
  REQUIRE(kv.grow(2, 15, &copies).ok());
  CHECK(copies.empty());
  kv.commit(2, longer);
  CHECK(kv.cached_blocks() == 3);
  kv.free_sequence(2);
  CHECK(kv.check_invariants().ok());
  CHECK(kv.match_prefix(longer).blocks.size() == 3);
}

TEST_CASE("prefix cache: a partly used cached last block is copied before it is written",
          "[kv][prefix]") {
  KvBlockAllocator kv = make_cached(6);
  const auto tokens = iota_tokens(8);
  run_and_free(kv, 1, tokens);
  const PrefixMatch match = kv.match_prefix(tokens);
  REQUIRE(match.blocks.size() == 2);
  // The whole prompt is cached; the last token is recomputed, so 7 positions are adopted.
  REQUIRE(kv.adopt_prefix(2, match.blocks, 7).ok());
  CHECK(kv.blocks_needed(2, 8) == 1);
  std::vector<KvBlockCopy> copies;
  REQUIRE(kv.grow(2, 8, &copies).ok());
  REQUIRE(copies.size() == 1);
  CHECK(copies[0].src == match.blocks[1]);
  CHECK(kv.block_table(2)[1] == copies[0].dst);
  CHECK(kv.writable(copies[0].dst));
  CHECK(kv.ref_count(match.blocks[1]) == 0);  // back on the LRU list, still cached
  CHECK(kv.cached_blocks() == 2);
  // Committing the copy registers nothing new: the same content is cached already.
  kv.commit(2, tokens);
  CHECK(kv.cached_blocks() == 2);
  kv.free_sequence(2);
  CHECK(kv.check_invariants().ok());
  CHECK(kv.match_prefix(tokens).blocks == match.blocks);
}

TEST_CASE("prefix cache: the same prefix computed twice is cached once; the chain continues",
          "[kv][prefix]") {
  KvBlockAllocator kv = make_cached(12);
  const auto a = iota_tokens(8);
  auto b = a;
  b.insert(b.end(), {1, 2, 3, 4});  // a's two blocks + one more
  REQUIRE(kv.grow(1, 8).ok());
  REQUIRE(kv.grow(2, 12).ok());  // both run at once, neither found anything cached
  kv.commit(1, a);
  kv.commit(2, b);  // its first two blocks duplicate 1's; its third chains after 1's second
  CHECK(kv.cached_blocks() == 3);
  const std::vector<BlockId> first(kv.block_table(1).begin(), kv.block_table(1).end());
  const PrefixMatch match = kv.match_prefix(b);
  REQUIRE(match.blocks.size() == 3);
  CHECK(match.blocks[0] == first[0]);
  CHECK(match.blocks[1] == first[1]);
  CHECK(match.blocks[2] == kv.block_table(2)[2]);
  kv.free_sequence(1);
  kv.free_sequence(2);
  CHECK(kv.cached_unreferenced_blocks() == 3);
  CHECK(kv.free_blocks() == 12);
  CHECK(kv.check_invariants().ok());
}

TEST_CASE("prefix cache: an empty free list evicts the least recently used cached block",
          "[kv][prefix]") {
  KvBlockAllocator kv = make_cached(4);
  const auto a = iota_tokens(8, 0);
  const auto b = iota_tokens(8, 50);
  run_and_free(kv, 1, a);
  run_and_free(kv, 2, b);
  CHECK(kv.cached_unreferenced_blocks() == 4);
  CHECK(kv.free_blocks() == 4);
  // Touch a again: b is now the least recently used.
  const PrefixMatch hit = kv.match_prefix(a);
  REQUIRE(kv.adopt_prefix(3, hit.blocks, 8).ok());
  kv.free_sequence(3);
  // A new sequence of one block evicts b's last block (released first, so older than b's first).
  REQUIRE(kv.grow(4, 4).ok());
  CHECK(kv.evictions() == 1);
  CHECK(kv.match_prefix(b).blocks.size() == 1);
  CHECK(kv.match_prefix(a).blocks.size() == 2);
  REQUIRE(kv.grow(4, 8).ok());
  CHECK(kv.match_prefix(b).blocks.empty());
  CHECK(kv.match_prefix(a).blocks.size() == 2);
  CHECK(kv.check_invariants().ok());
  // Held blocks are never evicted: with a's adopted, nothing is left to take.
  const PrefixMatch again = kv.match_prefix(a);
  REQUIRE(kv.adopt_prefix(5, again.blocks, 8).ok());
  CHECK(kv.free_blocks() == 0);
  CHECK(kv.grow(6, 1).code() == StatusCode::kResourceExhausted);
  kv.free_sequence(4);
  kv.free_sequence(5);
  CHECK(kv.check_invariants().ok());
}

TEST_CASE("prefix cache: adopt_prefix refuses what match_prefix could not have given",
          "[kv][prefix]") {
  KvBlockAllocator kv = make_cached(4);
  const auto tokens = iota_tokens(8);
  run_and_free(kv, 1, tokens);
  const PrefixMatch match = kv.match_prefix(tokens);
  REQUIRE(match.blocks.size() == 2);
  CHECK(kv.adopt_prefix(2, match.blocks, 4).code() == StatusCode::kInvalidArgument);  // too few
  CHECK(kv.adopt_prefix(2, match.blocks, 9).code() == StatusCode::kInvalidArgument);  // too many
  CHECK(kv.adopt_prefix(2, {}, 0).code() == StatusCode::kInvalidArgument);
  REQUIRE(kv.grow(3, 1).ok());  // an uncached block
  const std::vector<BlockId> uncached{kv.block_table(3)[0]};
  CHECK(kv.adopt_prefix(2, uncached, 1).code() == StatusCode::kInvalidArgument);
  REQUIRE(kv.adopt_prefix(2, match.blocks, 8).ok());
  CHECK(kv.adopt_prefix(2, match.blocks, 8).code() == StatusCode::kInvalidArgument);  // exists
  CHECK(kv.check_invariants().ok());
}

TEST_CASE("prefix cache: dropping it forgets every unreferenced block, keeps held ones",
          "[kv][prefix]") {
  KvBlockAllocator kv = make_cached(6);
  const auto a = iota_tokens(8, 0);
  const auto b = iota_tokens(4, 50);
  run_and_free(kv, 1, a);
  REQUIRE(kv.grow(2, 4).ok());
  kv.commit(2, b);
  CHECK(kv.drop_unreferenced_cache() == 2);
  CHECK(kv.match_prefix(a).blocks.empty());
  CHECK(kv.match_prefix(b).blocks.size() == 1);  // held by sequence 2
  CHECK(kv.free_blocks() == 5);
  CHECK(kv.check_invariants().ok());
}

TEST_CASE("prefix cache off: nothing is committed or matched, freed blocks are plain free",
          "[kv][prefix]") {
  auto created = KvBlockAllocator::create({4 * kBlock * 8, kBlock, 8});
  REQUIRE(created.ok());
  KvBlockAllocator kv = std::move(created).value();
  CHECK_FALSE(kv.prefix_caching());
  const auto tokens = iota_tokens(8);
  run_and_free(kv, 1, tokens);
  CHECK(kv.cached_blocks() == 0);
  CHECK(kv.match_prefix(tokens).blocks.empty());
  CHECK(kv.drop_unreferenced_cache() == 0);
  CHECK(kv.free_blocks() == 4);
  CHECK(kv.check_invariants().ok());
}

TEST_CASE("prefix cache events: stored blocks chain by content hash; evictions and drops",
          "[kv][prefix][events]") {
  KvBlockAllocator kv = make_cached(4);
  kv.set_events(true);
  const auto tokens = iota_tokens(8);
  run_and_free(kv, 1, tokens);
  std::vector<KvEvent> events = kv.take_events();
  REQUIRE(events.size() == 2);
  CHECK(events[0].kind == KvEvent::Kind::kStored);
  CHECK_FALSE(events[0].parent_hash.has_value());
  CHECK(events[0].token_ids == std::vector<TokenId>(tokens.begin(), tokens.begin() + 4));
  CHECK(events[1].parent_hash == events[0].block_hash);
  CHECK(events[1].token_ids == std::vector<TokenId>(tokens.begin() + 4, tokens.end()));
  CHECK(kv.take_events().empty());
  // The hashes depend on the tokens only: another allocator (another replica) agrees, whatever
  // block ids it used.
  KvBlockAllocator other = make_cached(6);
  other.set_events(true);
  REQUIRE(other.grow(9, 3).ok());  // shifts the block ids
  run_and_free(other, 1, tokens);
  const std::vector<KvEvent> again = other.take_events();
  REQUIRE(again.size() == 2);
  CHECK(again[0].block_hash == events[0].block_hash);
  CHECK(again[1].block_hash == events[1].block_hash);
  // A different first block changes every hash after it.
  auto changed = tokens;
  changed[0] = 1;
  run_and_free(other, 2, changed);
  const std::vector<KvEvent> third = other.take_events();
  REQUIRE(third.size() == 2);
  CHECK(third[1].token_ids == events[1].token_ids);
  CHECK(third[1].block_hash != events[1].block_hash);
  // Evictions are removals of those hashes; a drop that leaves nothing cached is one "cleared".
  REQUIRE(kv.grow(3, 16).ok());  // the 2 free blocks + the 2 cached ones, evicted
  events = kv.take_events();
  REQUIRE(events.size() == 2);
  CHECK(events[0].kind == KvEvent::Kind::kRemoved);
  CHECK(events[1].kind == KvEvent::Kind::kRemoved);
  kv.free_sequence(3);
  CHECK(kv.drop_unreferenced_cache() == 0);
  CHECK(kv.take_events().empty());
  run_and_free(kv, 4, tokens);
  kv.take_events();
  CHECK(kv.drop_unreferenced_cache() == 2);
  events = kv.take_events();
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == KvEvent::Kind::kCleared);
}

TEST_CASE("kv event log: numbered batches, replay, loss and close wake the listeners",
          "[kv][events]") {
  KvEventLog log(2);
  int woken = 0;
  const uint64_t id = log.add_listener([&woken] { ++woken; });
  log.publish({});  // nothing to say: no batch
  CHECK(log.last() == 0);
  for (int i = 0; i < 3; ++i) log.publish({KvEvent{}});
  CHECK(woken == 3);
  CHECK(log.last() == 3);
  bool lost = false;
  std::vector<KvEventBatch> batches = log.since(0, 10, &lost);
  CHECK(lost);  // batch 1 fell out of the 2 kept
  REQUIRE(batches.size() == 2);
  CHECK(batches[0].sequence_number == 2);
  CHECK(batches[1].sequence_number == 3);
  batches = log.since(2, 10, &lost);
  CHECK_FALSE(lost);
  REQUIRE(batches.size() == 1);
  CHECK(log.since(3, 10, &lost).empty());
  CHECK_FALSE(lost);
  log.close();
  CHECK(woken == 4);
  CHECK(log.closed());
  log.publish({KvEvent{}});
  CHECK(log.last() == 3);
  log.remove_listener(id);
  log.close();
  CHECK(woken == 4);
}

// Row p of a paged view's keys.
std::vector<float> key_row(const kernels::KvBlocks& view, size_t p, size_t dim) {
  const float* row = static_cast<const float*>(view.keys) +
                     (static_cast<size_t>(view.table[p / view.block_rows]) * view.block_rows +
                      p % view.block_rows) *
                         dim;
  return std::vector<float>(row, row + dim);
}

TEST_CASE("prefix cache: a paged cache never rewrites a cached block; adopters read its rows",
          "[kv][prefix][paged]") {
  constexpr size_t kDim = 2;
  auto pool = KvPool::create(1, kDim, kBlock, 4);
  REQUIRE(pool.ok());
  KvBlockAllocator kv = make_cached(4);
  const auto tokens = iota_tokens(8);
  std::vector<float> keys(8 * kDim);
  std::iota(keys.begin(), keys.end(), 1.0f);
  {
    PagedKvCache first(**pool, kv, 1, 16);
    REQUIRE(first.prepare_write(0, 8).ok());
    first.write(0, 0, keys, keys);
    first.set_length(8);
    kv.commit(1, tokens);
    // Rewinding into a committed block would change what later requests are handed.
    CHECK(first.prepare_write(4, 8).code() == StatusCode::kFailedPrecondition);
  }
  const PrefixMatch match = kv.match_prefix(tokens);
  REQUIRE(match.blocks.size() == 2);
  REQUIRE(kv.adopt_prefix(2, match.blocks, 7).ok());
  PagedKvCache second(**pool, kv, 2, 16);
  second.set_length(7);
  REQUIRE(second.prepare_write(7, 8).ok());  // copies the cached last block, then writes the copy
  const std::vector<float> changed{-1.0f, -2.0f};
  second.write(0, 7, changed, changed);
  const kernels::KvBlocks view = second.blocks(0, 8);
  for (size_t p = 0; p < 7; ++p) {
    INFO("position " << p);
    CHECK(key_row(view, p, kDim) ==
          std::vector<float>(keys.begin() + p * kDim, keys.begin() + (p + 1) * kDim));
  }
  CHECK(key_row(view, 7, kDim) == changed);
  // The cached block still holds the first sequence's row 7.
  REQUIRE(kv.adopt_prefix(3, match.blocks, 8).ok());
  PagedKvCache third(**pool, kv, 3, 16);
  CHECK(key_row(third.blocks(0, 8), 7, kDim) ==
        std::vector<float>(keys.begin() + 7 * kDim, keys.end()));
  CHECK(kv.check_invariants().ok());
}

}  // namespace
}  // namespace tandem::runtime
