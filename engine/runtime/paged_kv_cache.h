// KvPool: the scheduler's one KV memory pool of fixed-size blocks (allocated once); PagedKvCache:
// a sequence's KvCache viewed through its KvBlockAllocator block table into that pool.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "engine/runtime/kv_block_allocator.h"
#include "engine/runtime/kv_cache.h"

namespace tandem::runtime {

// K and V storage for n_blocks blocks of block_tokens positions x kv_dim elements of `type` (f32 or
// f16, kernels/cpu/kv_type.h), per layer. Layout: per layer, all K blocks then all V blocks; block
// b of a layer's K starts at element b * block_tokens * kv_dim of layer_keys(layer). A keys-only
// pool (MLA: the values are the leading part of each key row) stores no V: layer_values(layer) ==
// layer_keys(layer). Allocated once, never resized; the memory is left uninitialised (the OS backs
// pages as they are first written), and a block's rows are undefined until written. Block ids come
// from a KvBlockAllocator sized to the same block count, which decides who owns which block; the
// pool itself holds no bookkeeping. Threads: used by the thread that owns the allocator (the
// scheduler's loop).
class KvPool {
 public:
  // INVALID_ARGUMENT when a dimension is zero or the byte size overflows; RESOURCE_EXHAUSTED
  // when the memory cannot be allocated.
  static Result<std::unique_ptr<KvPool>> create(size_t n_layers, size_t kv_dim, size_t block_tokens,
                                                size_t n_blocks, bool keys_only = false,
                                                kernels::KvType type = kernels::KvType::kF32);
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  size_t n_layers() const { return n_layers_; }
  size_t kv_dim() const { return kv_dim_; }
  size_t block_tokens() const { return block_tokens_; }
  size_t n_blocks() const { return n_blocks_; }
  bool keys_only() const { return keys_only_; }
  kernels::KvType type() const { return type_; }
  // Bytes of the pool (K and V, all layers, all blocks).
  size_t bytes() const { return total_elements_ * kernels::kv_type_bytes(type_); }

  // The first byte of a layer's K (V) blocks.
  uint8_t* layer_keys(size_t layer);
  uint8_t* layer_values(size_t layer);
  const uint8_t* layer_keys(size_t layer) const;
  const uint8_t* layer_values(size_t layer) const;

  // Copies block src into block dst in every layer, K and V (copy-on-write of a shared block),
  // then calls the copy hook, if any, and returns its status (OK without a hook).
  Status copy_block(BlockId src, BlockId dst);

  // A mirror of the pool elsewhere (a DenseExecutor's device copy) is told of every block copy:
  // copy_block calls hook(src, dst) after the host copy. Empty = none (the default). The hook runs
  // on copy_block's thread; whoever installs it keeps what it refers to alive while it is set.
  using CopyHook = std::function<Status(BlockId src, BlockId dst)>;
  void set_copy_hook(CopyHook hook) { copy_hook_ = std::move(hook); }

 private:
  KvPool(size_t n_layers, size_t kv_dim, size_t block_tokens, size_t n_blocks, bool keys_only,
         kernels::KvType type, size_t total, std::unique_ptr<uint8_t[]> data);
  size_t planes() const { return keys_only_ ? 1 : 2; }
  size_t block_bytes() const { return block_tokens_ * kv_dim_ * kernels::kv_type_bytes(type_); }

  size_t n_layers_;
  size_t kv_dim_;
  size_t block_tokens_;
  size_t n_blocks_;
  bool keys_only_;
  kernels::KvType type_;
  size_t total_elements_;
  std::unique_ptr<uint8_t[]> data_;
  CopyHook copy_hook_;
};

// A KvBlockAllocator over every block of `pool` (its block size and count, as PagedKvCache
// requires), for callers that own a pool outside a Scheduler. The allocator's errors.
Result<KvBlockAllocator> make_allocator_for(const KvPool& pool);

// One sequence's KV cache in the pool: position p lives in block table[p / block_tokens]. The
// allocator's block table for `seq` is the source of truth: prepare_write grows it (taking free
// blocks, all or nothing) and performs the copy-on-write copies the allocator reports, so blocks
// shared with other sequences (KvBlockAllocator::fork) are never written. A sequence the allocator
// already knows (a fork's child) is adopted with its blocks; length() starts at 0 (set_length
// declares the inherited positions). Destruction frees the sequence in the allocator.
// Non-owning: the pool and the allocator must outlive the cache. Threads: the allocator's thread
// only (the scheduler's loop, or a test).
class PagedKvCache final : public KvCache {
 public:
  PagedKvCache(KvPool& pool, KvBlockAllocator& allocator, SeqId seq, size_t max_positions);
  ~PagedKvCache() override;
  PagedKvCache(const PagedKvCache&) = delete;
  PagedKvCache& operator=(const PagedKvCache&) = delete;

  size_t n_layers() const override { return pool_->n_layers(); }
  size_t kv_dim() const override { return pool_->kv_dim(); }
  bool keys_only() const override { return pool_->keys_only(); }
  size_t max_positions() const override { return max_positions_; }
  size_t length() const override { return length_; }
  // RESOURCE_EXHAUSTED (nothing taken) when the free blocks do not cover end_pos;
  // FAILED_PRECONDITION when rewinding would write a block other sequences share or the prefix
  // cache holds. An error from
  // the pool's copy hook is returned after the blocks were taken (the table is updated): the
  // copied blocks are then undefined in the mirror and the caller fails the sequence.
  Status prepare_write(size_t start_pos, size_t end_pos) override;
  void write(size_t layer, size_t start_pos, std::span<const float> k_rows,
             std::span<const float> v_rows) override;
  kernels::KvBlocks blocks(size_t layer, size_t n_positions) const override;
  void set_length(size_t n) override;

  SeqId seq() const { return seq_; }
  // The pool this cache's blocks live in.
  const KvPool& pool() const { return *pool_; }
  // The block ids in position order (a copy of the allocator's table as of the last
  // prepare_write or construction).
  std::span<const BlockId> block_table() const { return table_; }
  // Positions the current blocks can hold (capped at max_positions()).
  size_t prepared() const;

 private:
  KvPool* pool_;
  KvBlockAllocator* allocator_;
  SeqId seq_;
  size_t max_positions_;
  size_t length_ = 0;
  std::vector<BlockId> table_;
};

}  // namespace tandem::runtime
