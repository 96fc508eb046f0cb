// KvCache: one sequence's keys and values per layer (stored as f32 or f16, kernels/cpu/kv_type.h;
// written as floats), behind a small interface read through
// a block table (kernels::KvBlocks); DenseKvCache is the contiguous implementation (one block),
// PagedKvCache (paged_kv_cache.h) the one backed by the scheduler's shared pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/cpu/attention.h"

namespace tandem::runtime {

// Per layer, K and V rows of kv_dim floats (kv_dim = n_kv_heads * head_dim), row p = position p
// (keys stored after RoPE). length() positions hold valid entries.
// Owned by the sequence (the scheduler's request or the CLI's session); used by one forward pass
// at a time, on the forward's thread; never shared between two sequences of the same batch.
class KvCache {
 public:
  virtual ~KvCache() = default;

  virtual size_t n_layers() const = 0;
  virtual size_t kv_dim() const = 0;
  // No V rows are stored: the values are the leading part of each key row (MLA).
  virtual bool keys_only() const { return false; }
  // The most positions this cache can ever hold (its context limit).
  virtual size_t max_positions() const = 0;
  // Positions 0 .. length() - 1 hold valid keys/values.
  virtual size_t length() const = 0;
  // Makes positions [0, end_pos) addressable and [start_pos, end_pos) writable (start_pos <=
  // end_pos; start_pos may be below length() to rewind). OUT_OF_RANGE when end_pos >
  // max_positions(); RESOURCE_EXHAUSTED when memory (or KV blocks) cannot be had;
  // FAILED_PRECONDITION when a position to write lies in storage shared with another sequence
  // that cannot be copied. On error nothing changes. Views taken before are invalidated.
  virtual Status prepare_write(size_t start_pos, size_t end_pos) = 0;
  // Copies rows into positions [start_pos, start_pos + k_rows.size() / kv_dim) of `layer`; k_rows
  // and v_rows hold whole rows, the same count (v_rows empty for a keys-only cache, whose
  // blocks() views have values == keys); the positions must have been prepared. Bugs
  // (TANDEM_CHECK) otherwise.
  virtual void write(size_t layer, size_t start_pos, std::span<const float> k_rows,
                     std::span<const float> v_rows) = 0;
  // Read view of `layer` covering at least positions [0, n_positions), n_positions <= the
  // prepared count. Valid until the next prepare_write() (or the cache's destruction).
  virtual kernels::KvBlocks blocks(size_t layer, size_t n_positions) const = 0;
  // Declares positions [0, n) valid (n <= prepared). Shrinking forgets the tail (rewind).
  virtual void set_length(size_t n) = 0;
};

// Contiguous storage per layer (elements of `type`), grown by doubling (up to max_positions) on
// prepare_write.
class DenseKvCache final : public KvCache {
 public:
  // keys_only: no V rows are stored (MLA, whose values are the leading part of each key row).
  DenseKvCache(size_t n_layers, size_t kv_dim, size_t max_positions, bool keys_only = false,
               kernels::KvType type = kernels::KvType::kF32);

  size_t n_layers() const override { return keys_.size(); }
  size_t kv_dim() const override { return kv_dim_; }
  bool keys_only() const override { return keys_only_; }
  size_t max_positions() const override { return max_positions_; }
  size_t length() const override { return length_; }
  Status prepare_write(size_t start_pos, size_t end_pos) override;
  void write(size_t layer, size_t start_pos, std::span<const float> k_rows,
             std::span<const float> v_rows) override;
  kernels::KvBlocks blocks(size_t layer, size_t n_positions) const override;
  void set_length(size_t n) override;

  // Bytes currently allocated (K and V, all layers).
  size_t allocated_bytes() const;

 private:
  size_t kv_dim_;
  size_t max_positions_;
  bool keys_only_;
  kernels::KvType type_;
  size_t reserved_ = 0;
  size_t length_ = 0;
  std::vector<std::vector<uint8_t>> keys_;  // per layer: reserved_ x kv_dim elements of type_
  std::vector<std::vector<uint8_t>> values_;
};

}  // namespace tandem::runtime
