// KvCache: one sequence's float keys and values per layer, behind a small interface so that the
// scheduler can back it with paged blocks; DenseKvCache is the contiguous implementation.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "engine/base/status.h"

namespace tandem::runtime {

// Layout per layer: [positions x kv_dim] floats for K and for V, row p = position p (keys stored
// after RoPE), kv_dim = n_kv_heads * head_dim. length() positions hold valid entries.
// Owned by the sequence (the scheduler's request); used by one forward pass at a time, on the
// forward's thread; never shared between two sequences of the same batch.
class KvCache {
 public:
  virtual ~KvCache() = default;

  virtual size_t n_layers() const = 0;
  virtual size_t kv_dim() const = 0;
  // The most positions this cache can ever hold (its context limit).
  virtual size_t max_positions() const = 0;
  // Positions 0 .. length() - 1 hold valid keys/values.
  virtual size_t length() const = 0;
  // Makes positions [0, n_positions) addressable. OUT_OF_RANGE when n_positions >
  // max_positions(); RESOURCE_EXHAUSTED when memory cannot be had. Views taken before are
  // invalidated.
  virtual Status reserve(size_t n_positions) = 0;
  // Contiguous K (or V) rows [0, n_positions) of `layer`, n_positions <= the reserved count.
  // Valid until the next reserve().
  virtual std::span<float> keys(size_t layer, size_t n_positions) = 0;
  virtual std::span<float> values(size_t layer, size_t n_positions) = 0;
  // Declares positions [0, n) valid (n <= reserved). Shrinking forgets the tail (rewind).
  virtual void set_length(size_t n) = 0;
};

// Contiguous float storage per layer, grown by doubling (up to max_positions) on reserve.
class DenseKvCache final : public KvCache {
 public:
  DenseKvCache(size_t n_layers, size_t kv_dim, size_t max_positions);

  size_t n_layers() const override { return keys_.size(); }
  size_t kv_dim() const override { return kv_dim_; }
  size_t max_positions() const override { return max_positions_; }
  size_t length() const override { return length_; }
  Status reserve(size_t n_positions) override;
  std::span<float> keys(size_t layer, size_t n_positions) override;
  std::span<float> values(size_t layer, size_t n_positions) override;
  void set_length(size_t n) override;

  // Bytes currently allocated (K and V, all layers).
  size_t allocated_bytes() const;

 private:
  size_t kv_dim_;
  size_t max_positions_;
  size_t reserved_ = 0;
  size_t length_ = 0;
  std::vector<std::vector<float>> keys_;
  std::vector<std::vector<float>> values_;
};

}  // namespace tandem::runtime
