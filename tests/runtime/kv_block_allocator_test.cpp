// Tests of KvBlockAllocator: budget arithmetic, all-or-nothing growth, sharing and copy-on-write.
#include "engine/runtime/kv_block_allocator.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <vector>

namespace tandem::runtime {
namespace {

KvBlockAllocator make(int64_t blocks, int64_t block_tokens = 16) {
  auto result = KvBlockAllocator::create({blocks * block_tokens * 8, block_tokens, 8});
  REQUIRE(result.ok());
  return std::move(result).value();
}

TEST_CASE("kv bytes per token and block count from a model's geometry", "[kv]") {
  // 24 layers x 4 kv heads x 128 head dim x 2 (K, V) x 4 bytes = 98304 per token; x 16 tokens =
  // 1572864 per block.
  auto per_token = kv_bytes_per_token(24, 4, 128, 4);
  REQUIRE(per_token.ok());
  CHECK(*per_token == 98304);
  auto kv = KvBlockAllocator::create({100 * 1572864 + 5, 16, *per_token});
  REQUIRE(kv.ok());
  CHECK(kv->block_bytes() == 1572864);
  CHECK(kv->total_blocks() == 100);  // the remainder is not a block
  CHECK(kv->free_blocks() == 100);

  CHECK(kv_bytes_per_token(0, 4, 128, 4).status().code() == StatusCode::kInvalidArgument);
  CHECK(kv_bytes_per_token(std::numeric_limits<int64_t>::max() / 2, 4, 128, 4).status().code() ==
        StatusCode::kInvalidArgument);
  auto none = KvBlockAllocator::create({1572863, 16, 98304});
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("1572863") != std::string::npos);
  CHECK(KvBlockAllocator::create({100, 0, 4}).status().code() == StatusCode::kInvalidArgument);
  CHECK(KvBlockAllocator::create({-1, 16, 4}).status().code() == StatusCode::kInvalidArgument);
  CHECK(KvBlockAllocator::create(
            {std::numeric_limits<int64_t>::max(), int64_t{1} << 32, int64_t{1} << 32})
            .status()
            .code() == StatusCode::kInvalidArgument);  // block bytes overflow
}

TEST_CASE("kv blocks for tokens rounds up", "[kv]") {
  CHECK(kv_blocks_for_tokens(0, 16) == 0);
  CHECK(kv_blocks_for_tokens(1, 16) == 1);
  CHECK(kv_blocks_for_tokens(16, 16) == 1);
  CHECK(kv_blocks_for_tokens(17, 16) == 2);
  CHECK(kv_blocks_for_tokens(-3, 16) == 0);
}

TEST_CASE("kv grow and free keep the free count exact and are all-or-nothing", "[kv]") {
  KvBlockAllocator kv = make(10);
  REQUIRE(kv.grow(1, 17).ok());  // 2 blocks
  CHECK(kv.free_blocks() == 8);
  CHECK(kv.block_table(1).size() == 2);
  REQUIRE(kv.grow(1, 32).ok());  // still 2 blocks
  CHECK(kv.free_blocks() == 8);
  REQUIRE(kv.grow(1, 33).ok());  // 3
  CHECK(kv.free_blocks() == 7);
  CHECK(kv.blocks_needed(2, 7 * 16) == 7);
  REQUIRE(kv.grow(2, 7 * 16).ok());
  CHECK(kv.free_blocks() == 0);
  CHECK(kv.check_invariants().ok());

  const std::vector<BlockId> before(kv.block_table(1).begin(), kv.block_table(1).end());
  Status full = kv.grow(1, 49);
  CHECK(full.code() == StatusCode::kResourceExhausted);
  CHECK(kv.sequence_tokens(1) == 33);
  CHECK(std::vector<BlockId>(kv.block_table(1).begin(), kv.block_table(1).end()) == before);
  CHECK(kv.grow(3, 1).code() == StatusCode::kResourceExhausted);
  CHECK_FALSE(kv.has_sequence(3));
  CHECK(kv.grow(1, 10).code() == StatusCode::kInvalidArgument);  // no shrinking

  kv.free_sequence(2);
  CHECK(kv.free_blocks() == 7);
  kv.free_sequence(2);  // idempotent
  CHECK(kv.free_blocks() == 7);
  kv.free_sequence(1);
  CHECK(kv.free_blocks() == 10);
  CHECK(kv.used_blocks() == 0);
  CHECK(kv.check_invariants().ok());
}

TEST_CASE("kv fork shares blocks and copies a shared partial last block on write", "[kv]") {
  KvBlockAllocator kv = make(8);
  REQUIRE(kv.grow(1, 20).ok());  // one full block + one partial (4 tokens)
  REQUIRE(kv.fork(1, 2).ok());
  REQUIRE(kv.fork(1, 3).ok());
  CHECK(kv.free_blocks() == 6);  // sharing takes no block
  const BlockId full = kv.block_table(1)[0];
  const BlockId partial = kv.block_table(1)[1];
  CHECK(kv.ref_count(full) == 3);
  CHECK(kv.ref_count(partial) == 3);
  CHECK(kv.check_invariants().ok());

  CHECK(kv.blocks_needed(2, 21) == 1);  // the copy of the partial block
  std::vector<KvBlockCopy> copies;
  REQUIRE(kv.grow(2, 21, &copies).ok());
  REQUIRE(copies.size() == 1);
  CHECK(copies[0].src == partial);
  CHECK(copies[0].dst == kv.block_table(2)[1]);
  CHECK(kv.block_table(2)[1] != partial);
  CHECK(kv.block_table(2)[0] == full);
  CHECK(kv.ref_count(partial) == 2);
  CHECK(kv.ref_count(full) == 3);
  CHECK(kv.free_blocks() == 5);

  copies.clear();
  REQUIRE(kv.grow(3, 40, &copies).ok());  // copy of partial + one new block
  CHECK(copies.size() == 1);
  CHECK(kv.ref_count(partial) == 1);
  CHECK(kv.free_blocks() == 3);

  copies.clear();
  REQUIRE(kv.grow(1, 21, &copies).ok());  // the last holder writes in place
  CHECK(copies.empty());
  CHECK(kv.block_table(1)[1] == partial);
  CHECK(kv.check_invariants().ok());

  kv.free_sequence(1);
  CHECK(kv.ref_count(full) == 2);
  CHECK(kv.free_blocks() == 4);  // only the partial block came back
  kv.free_sequence(2);
  kv.free_sequence(3);
  CHECK(kv.free_blocks() == 8);
  CHECK(kv.check_invariants().ok());
}

TEST_CASE("kv fork of a block-aligned sequence needs no copy", "[kv]") {
  KvBlockAllocator kv = make(4);
  REQUIRE(kv.grow(1, 32).ok());
  REQUIRE(kv.fork(1, 2).ok());
  std::vector<KvBlockCopy> copies;
  CHECK(kv.blocks_needed(2, 33) == 1);
  REQUIRE(kv.grow(2, 33, &copies).ok());
  CHECK(copies.empty());
  CHECK(kv.free_blocks() == 1);
  CHECK(kv.fork(9, 10).code() == StatusCode::kInvalidArgument);
  CHECK(kv.fork(1, 2).code() == StatusCode::kInvalidArgument);
  // A copy that does not fit fails without change.
  REQUIRE(kv.grow(3, 8).ok());
  REQUIRE(kv.fork(3, 4).ok());
  CHECK(kv.free_blocks() == 0);
  CHECK(kv.grow(4, 9).code() == StatusCode::kResourceExhausted);
  CHECK(kv.ref_count(kv.block_table(3)[0]) == 2);
  CHECK(kv.check_invariants().ok());
}

}  // namespace
}  // namespace tandem::runtime
