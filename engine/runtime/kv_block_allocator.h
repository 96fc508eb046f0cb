// KvBlockAllocator: the paged KV cache budget as fixed-size blocks, per-sequence block tables and
// reference counts (shared prompt blocks, copy-on-write of a shared partial last block).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/base/result.h"
#include "engine/base/status.h"

namespace tandem::runtime {

using BlockId = int32_t;
using SeqId = uint64_t;

// Bytes of K and V one token occupies across all layers:
// layers × kv_heads × head_dim × 2 (K and V) × element_bytes. INVALID_ARGUMENT for a
// non-positive factor or on overflow.
Result<int64_t> kv_bytes_per_token(int64_t layers, int64_t kv_heads, int64_t head_dim,
                                   int64_t element_bytes);

// Number of blocks that hold `tokens` tokens (ceil division); 0 for tokens <= 0.
int64_t kv_blocks_for_tokens(int64_t tokens, int64_t block_tokens);

struct KvBlockConfig {
  int64_t budget_bytes = 0;     // total KV memory; rounded down to whole blocks
  int64_t block_tokens = 16;    // tokens per block
  int64_t bytes_per_token = 0;  // from kv_bytes_per_token
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
class KvBlockAllocator {
 public:
  // INVALID_ARGUMENT when a field is non-positive, a block's byte size overflows, or the budget
  // holds no whole block.
  static Result<KvBlockAllocator> create(const KvBlockConfig& config);

  int64_t block_tokens() const { return block_tokens_; }
  int64_t block_bytes() const { return block_bytes_; }
  int64_t total_blocks() const { return static_cast<int64_t>(ref_counts_.size()); }
  int64_t free_blocks() const { return static_cast<int64_t>(free_list_.size()); }
  int64_t used_blocks() const { return total_blocks() - free_blocks(); }

  bool has_sequence(SeqId seq) const { return tables_.count(seq) != 0; }
  // Tokens the sequence's blocks currently cover (as last passed to grow/fork); 0 if unknown.
  int64_t sequence_tokens(SeqId seq) const;
  // The sequence's block table in position order; empty if unknown. Invalidated by any mutation.
  std::span<const BlockId> block_table(SeqId seq) const;
  // Reference count of a block (0 = free). Bug to pass an id outside [0, total_blocks).
  int32_t ref_count(BlockId block) const;

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
  };

  KvBlockAllocator(int64_t block_tokens, int64_t block_bytes, int64_t num_blocks);
  BlockId take_free_block();
  void release_block(BlockId block);

  int64_t block_tokens_ = 0;
  int64_t block_bytes_ = 0;
  std::vector<int32_t> ref_counts_;
  std::vector<BlockId> free_list_;  // a stack; the lowest ids are handed out first initially
  std::unordered_map<SeqId, Table> tables_;
};

}  // namespace tandem::runtime
