// KvBlockAllocator: the paged KV cache budget as fixed-size blocks, per-sequence block tables and
// reference counts (shared prompt blocks, copy-on-write of a shared partial last block), and the
// prefix cache (full blocks kept after their sequences end, found again by their token prefix).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "engine/runtime/kv_event_log.h"
#include "engine/runtime/kv_prefix_index.h"

namespace tandem::runtime {

using SeqId = uint64_t;

// Bytes of K and V one token occupies across all layers:
// layers × kv_heads × head_dim × 2 (K and V) × element_bytes; × 1 when keys_only (MLA's latent
// row, whose values are part of the key). INVALID_ARGUMENT for a non-positive factor or on
// overflow.
Result<int64_t> kv_bytes_per_token(int64_t layers, int64_t kv_heads, int64_t head_dim,
                                   int64_t element_bytes, bool keys_only = false);

// Number of blocks that hold `tokens` tokens (ceil division); 0 for tokens <= 0.
int64_t kv_blocks_for_tokens(int64_t tokens, int64_t block_tokens);

struct KvBlockConfig {
  int64_t budget_bytes = 0;     // total KV memory; rounded down to whole blocks
  int64_t block_tokens = 16;    // tokens per block
  int64_t bytes_per_token = 0;  // from kv_bytes_per_token
  // Keep full blocks after their sequences end and reuse them for requests with the same prefix.
  bool prefix_caching = false;
};

// The cached blocks that hold a token sequence's longest cached prefix (whole blocks from position
// 0, in order). Valid until the allocator's next mutation.
struct PrefixMatch {
  std::vector<BlockId> blocks;
  int64_t unreferenced = 0;  // of them, blocks no sequence holds (adopting takes them off the free
                             // count)
};

// When a write would land in a block other sequences also reference, the writer gets a fresh
// block; the caller (the model runner) must copy the KV data of `src` into `dst` before writing.
struct KvBlockCopy {
  BlockId src = 0;
  BlockId dst = 0;
  friend bool operator==(const KvBlockCopy&, const KvBlockCopy&) = default;
};

// Owns block bookkeeping only (ids, refcounts, tables), never the KV memory itself.
// Single-threaded: owned and called by the scheduler thread only. No fragmentation by
// construction: every block has the same size and any free block serves any sequence.
//
// Prefix caching (KvBlockConfig::prefix_caching): commit() registers a sequence's full blocks
// under the hash chain of their token ids once their KV is written (KvPrefixIndex). A registered
// block is immutable: a sequence that must write into one gets a private copy first (as for a
// shared block). When its last reference goes, a registered block is not freed but kept, most
// recently used last; match_prefix() finds such blocks again and adopt_prefix() hands them to a
// new sequence. free_blocks() counts them as free: a block is taken from the free list first, and
// only when that is empty is the least recently used cached block evicted (and forgotten).
class KvBlockAllocator {
 public:
  // INVALID_ARGUMENT when a field is non-positive, a block's byte size overflows, or the budget
  // holds no whole block.
  static Result<KvBlockAllocator> create(const KvBlockConfig& config);

  int64_t block_tokens() const { return block_tokens_; }
  int64_t block_bytes() const { return block_bytes_; }
  int64_t total_blocks() const { return static_cast<int64_t>(ref_counts_.size()); }
  // Blocks a grow can take: never-used or released ones plus unreferenced cached ones.
  int64_t free_blocks() const {
    return static_cast<int64_t>(free_list_.size()) + (index_ ? index_->unused() : 0);
  }
  int64_t used_blocks() const { return total_blocks() - free_blocks(); }

  bool has_sequence(SeqId seq) const { return tables_.count(seq) != 0; }
  // Tokens the sequence's blocks currently cover (as last passed to grow/fork); 0 if unknown.
  int64_t sequence_tokens(SeqId seq) const;
  // The sequence's block table in position order; empty if unknown. Invalidated by any mutation.
  std::span<const BlockId> block_table(SeqId seq) const;
  // Blocks of the sequence it alone holds: what free_sequence would make free (0 if unknown).
  int64_t sole_blocks(SeqId seq) const;
  // Reference count of a block (0 = free). Bug to pass an id outside [0, total_blocks).
  int32_t ref_count(BlockId block) const;
  // A block a sequence may write: held by it alone and not registered in the prefix cache.
  bool writable(BlockId block) const;

  bool prefix_caching() const { return index_ != nullptr; }
  // Registered blocks (referenced or not) and the unreferenced ones among them; 0 without prefix
  // caching.
  int64_t cached_blocks() const { return index_ ? index_->cached() : 0; }
  int64_t cached_unreferenced_blocks() const { return index_ ? index_->unused() : 0; }
  // Cached blocks evicted to make room so far.
  int64_t evictions() const { return evictions_; }

  // The longest cached prefix of `tokens` in whole blocks; empty without prefix caching.
  PrefixMatch match_prefix(std::span<const TokenId> tokens) const;
  // Creates `seq` holding `blocks` (a match_prefix result, unchanged since) as its first blocks,
  // covering `tokens` positions ((blocks - 1) * block_tokens < tokens <= blocks * block_tokens).
  // Writing the rest of a partly covered last block copies it first. Takes no free block beyond
  // the unreferenced matched ones. INVALID_ARGUMENT when the sequence exists, the token count does
  // not fit the blocks, or a block is not cached.
  Status adopt_prefix(SeqId seq, std::span<const BlockId> blocks, int64_t tokens);
  // Registers the sequence's full blocks whose KV is now written: `tokens` are its token ids from
  // position 0 whose KV is computed (a prefix of what its blocks cover). Blocks committed before
  // are skipped; a block whose content is already cached elsewhere stays private. No-op without
  // prefix caching or for an unknown sequence.
  void commit(SeqId seq, std::span<const TokenId> tokens);
  // Forgets every cached block no sequence references (they become plain free blocks); the number
  // forgotten. Referenced cached blocks stay cached.
  int64_t drop_unreferenced_cache();

  // With events on (and prefix caching), every registration, eviction and drop is recorded as a
  // KvEvent (a drop that leaves nothing cached as one kCleared) until take_events() hands them
  // over, oldest first.
  void set_events(bool on) { events_enabled_ = on && index_ != nullptr; }
  std::vector<KvEvent> take_events();

  // Blocks grow(seq, tokens) would take from the free list (new blocks plus copy-on-write
  // copies); works for unknown sequences (counts from zero).
  int64_t blocks_needed(SeqId seq, int64_t tokens) const;

  // Makes the sequence's blocks cover `tokens` tokens (creating the sequence if new), about to
  // write positions [sequence_tokens, tokens). A shared last partial block that will be written
  // is replaced by a private copy (reported in `copies`). All or nothing: RESOURCE_EXHAUSTED and
  // no change when the free list is too short. INVALID_ARGUMENT when tokens < sequence_tokens.
  Status grow(SeqId seq, int64_t tokens, std::vector<KvBlockCopy>* copies = nullptr);

  // Makes `child` share every block of `parent` (reference counts + 1), e.g. the n samples of one
  // prompt. INVALID_ARGUMENT if parent is unknown or child already exists. Takes no free block.
  Status fork(SeqId parent, SeqId child);

  // Drops the sequence's references; blocks whose count reaches 0 return to the free list.
  // Unknown sequences are ignored (idempotent).
  void free_sequence(SeqId seq);

  // Recounts every invariant (refcounts equal table references, free list = zero-count blocks,
  // no duplicates); returns INTERNAL naming the first violation. For tests and debug checks.
  Status check_invariants() const;

 private:
  struct Table {
    std::vector<BlockId> blocks;
    int64_t tokens = 0;
    int64_t committed = 0;     // leading blocks commit() has handled
    PrefixParent parent;       // the chain handle after them (the canonical cached copy)
    uint64_t parent_hash = 0;  // its content hash
    // A hash slot was taken, or the canonical copy chained through was evicted: later blocks
    // are not registered.
    bool chain_broken = false;
  };

  KvBlockAllocator(int64_t block_tokens, int64_t block_bytes, int64_t num_blocks,
                   bool prefix_caching);
  BlockId take_free_block();
  void release_block(BlockId block);
  // The table's last block must be replaced by a private copy before the next write into it.
  bool last_needs_copy(const Table& table) const;
  void record_removed(BlockId block);

  int64_t block_tokens_ = 0;
  int64_t block_bytes_ = 0;
  std::vector<int32_t> ref_counts_;
  std::vector<BlockId> free_list_;  // a stack; the lowest ids are handed out first initially
  std::unordered_map<SeqId, Table> tables_;
  std::unique_ptr<KvPrefixIndex> index_;  // null without prefix caching
  int64_t evictions_ = 0;
  bool events_enabled_ = false;
  std::vector<KvEvent> events_;
};

}  // namespace tandem::runtime
