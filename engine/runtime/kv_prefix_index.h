// KvPrefixIndex: which KV blocks hold a known token prefix (the prefix cache's lookup table), and
// the least-recently-used order of the cached blocks nobody references.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/runtime/request.h"

namespace tandem::runtime {

using BlockId = int32_t;

// Names one cached block's content: the block and the generation it was registered under. A block
// id is reused once evicted; the generation tells its new content from the old, so a child
// registered under an evicted parent can never match the block's next occupant.
struct PrefixParent {
  BlockId block = -1;  // -1: the sequence start (a chain's first block)
  uint64_t generation = 0;
  friend bool operator==(const PrefixParent&, const PrefixParent&) = default;
};

// A full block's identity is (parent, its block_tokens token ids): a hash chain over the token
// ids from position 0, so equal prefixes find the same blocks and nothing else in a block's KV can
// differ (one model, positions fixed by the chain). The hash only locates a candidate: every
// lookup compares the parent and the token ids exactly, so a hash collision can never hand one
// request another's KV.
//
// Bookkeeping only (no KV memory, no reference counts): owned by a KvBlockAllocator, which keeps
// the unreferenced cached blocks in the LRU order below and evicts from its old end when its free
// list is empty. Single-threaded, like its owner.
class KvPrefixIndex {
 public:
  KvPrefixIndex(int64_t num_blocks, int64_t block_tokens);

  int64_t block_tokens() const { return block_tokens_; }
  // Blocks registered (referenced or not).
  int64_t cached() const { return cached_; }
  // Registered blocks that no sequence references (in the LRU list).
  int64_t unused() const { return unused_; }

  bool is_cached(BlockId block) const { return entry(block).cached; }
  // The handle children of a cached block are registered under. Bug for an uncached block.
  PrefixParent handle(BlockId block) const;
  // The cached block holding `tokens` (block_tokens ids) after `parent`, or -1.
  BlockId find(PrefixParent parent, std::span<const TokenId> tokens) const;
  // Registers an uncached block as holding `tokens` after `parent`. False (nothing changes) when
  // another block already holds that content or its hash slot (a collision, which keeps the old).
  // `parent_hash`: the parent's content_hash (ignored for the sequence start).
  bool insert(PrefixParent parent, uint64_t parent_hash, std::span<const TokenId> tokens,
              BlockId block);
  // Whether `parent` still names the content it named when taken (a cached block of the same
  // generation, or the sequence start).
  bool current(PrefixParent parent) const;
  // The content hash of a cached block: a chain over its tokens and its parents' from position
  // 0, independent of block ids, so equal prefixes hash alike in every process (KV events). Not
  // used for lookups.
  uint64_t content_hash(BlockId block) const;
  // Forgets a cached block (it must not be in the LRU list).
  void erase(BlockId block);

  // The LRU list of unreferenced cached blocks: push at the recent end, remove from anywhere, pop
  // the oldest (-1 when empty).
  void push_unused(BlockId block);
  void remove_unused(BlockId block);
  BlockId pop_oldest_unused();
  bool in_unused(BlockId block) const { return entry(block).in_lru; }

 private:
  struct Entry {
    bool cached = false;
    bool in_lru = false;
    uint64_t generation = 0;
    uint64_t key = 0;
    uint64_t content_hash = 0;
    PrefixParent parent;
    BlockId prev = -1;  // LRU neighbours (towards the old end / the recent end)
    BlockId next = -1;
  };

  const Entry& entry(BlockId block) const;
  Entry& entry(BlockId block);
  uint64_t key_of(PrefixParent parent, std::span<const TokenId> tokens) const;
  std::span<const TokenId> tokens_of(BlockId block) const;

  int64_t block_tokens_;
  std::vector<Entry> entries_;
  std::vector<TokenId> tokens_;  // block_tokens ids per block, valid while cached
  std::unordered_map<uint64_t, BlockId> by_key_;
  uint64_t next_generation_ = 1;
  int64_t cached_ = 0;
  int64_t unused_ = 0;
  BlockId oldest_ = -1;
  BlockId newest_ = -1;
};

}  // namespace tandem::runtime
