// DenseKvCache: contiguous per-layer float K/V rows grown on demand.
#include "engine/runtime/kv_cache.h"

#include <algorithm>
#include <new>
#include <string>

#include "engine/base/check.h"

namespace tandem::runtime {

DenseKvCache::DenseKvCache(size_t n_layers, size_t kv_dim, size_t max_positions)
    : kv_dim_(kv_dim), max_positions_(max_positions), keys_(n_layers), values_(n_layers) {}

Status DenseKvCache::reserve(size_t n_positions) {
  if (n_positions > max_positions_) {
    return out_of_range_error("sequence needs " + std::to_string(n_positions) +
                              " positions; the context limit is " + std::to_string(max_positions_));
  }
  if (n_positions <= reserved_) return Status();
  const size_t target =
      std::min(max_positions_, std::max({n_positions, 2 * reserved_, size_t{16}}));
  try {
    for (size_t l = 0; l < keys_.size(); ++l) {
      keys_[l].resize(target * kv_dim_);
      values_[l].resize(target * kv_dim_);
    }
  } catch (const std::bad_alloc&) {
    return resource_exhausted_error("cannot allocate the KV cache for " + std::to_string(target) +
                                    " positions");
  }
  reserved_ = target;
  return Status();
}

std::span<float> DenseKvCache::keys(size_t layer, size_t n_positions) {
  TANDEM_CHECK(layer < keys_.size() && n_positions <= reserved_);
  return std::span<float>(keys_[layer].data(), n_positions * kv_dim_);
}

std::span<float> DenseKvCache::values(size_t layer, size_t n_positions) {
  TANDEM_CHECK(layer < values_.size() && n_positions <= reserved_);
  return std::span<float>(values_[layer].data(), n_positions * kv_dim_);
}

void DenseKvCache::set_length(size_t n) {
  TANDEM_CHECK(n <= reserved_);
  length_ = n;
}

size_t DenseKvCache::allocated_bytes() const {
  return 2 * keys_.size() * reserved_ * kv_dim_ * sizeof(float);
}

}  // namespace tandem::runtime
