// DenseKvCache: contiguous per-layer K/V rows (f32 or f16) grown on demand.
#include "engine/runtime/kv_cache.h"

#include <algorithm>
#include <new>
#include <string>

#include "base/check.h"

namespace tandem::runtime {
namespace {
constexpr int32_t kSingleBlock[1] = {0};
}  // namespace

DenseKvCache::DenseKvCache(size_t n_layers, size_t kv_dim, size_t max_positions, bool keys_only,
                           kernels::KvType type)
    : kv_dim_(kv_dim),
      max_positions_(max_positions),
      keys_only_(keys_only),
      type_(type),
      keys_(n_layers),
      values_(n_layers) {}

Status DenseKvCache::prepare_write(size_t start_pos, size_t end_pos) {
  TANDEM_CHECK(start_pos <= end_pos);
  if (end_pos > max_positions_) {
    return out_of_range_error("sequence needs " + std::to_string(end_pos) +
                              " positions; the context limit is " + std::to_string(max_positions_));
  }
  if (end_pos <= reserved_) return Status();
  const size_t target = std::min(max_positions_, std::max({end_pos, 2 * reserved_, size_t{16}}));
  try {
    const size_t bytes = target * kv_dim_ * kernels::kv_type_bytes(type_);
    for (size_t l = 0; l < keys_.size(); ++l) {
      keys_[l].resize(bytes);
      if (!keys_only_) values_[l].resize(bytes);
    }
  } catch (const std::bad_alloc&) {
    return resource_exhausted_error("cannot allocate the KV cache for " + std::to_string(target) +
                                    " positions");
  }
  reserved_ = target;
  return Status();
}

void DenseKvCache::write(size_t layer, size_t start_pos, std::span<const float> k_rows,
                         std::span<const float> v_rows) {
  TANDEM_CHECK(layer < keys_.size() && v_rows.size() == (keys_only_ ? 0 : k_rows.size()));
  TANDEM_CHECK(kv_dim_ > 0 && k_rows.size() % kv_dim_ == 0);
  TANDEM_CHECK(start_pos + k_rows.size() / kv_dim_ <= reserved_);
  const size_t offset = start_pos * kv_dim_ * kernels::kv_type_bytes(type_);
  kernels::store_kv_elements(type_, k_rows.data(), keys_[layer].data() + offset, k_rows.size());
  if (!v_rows.empty()) {
    kernels::store_kv_elements(type_, v_rows.data(), values_[layer].data() + offset, v_rows.size());
  }
}

kernels::KvBlocks DenseKvCache::blocks(size_t layer, size_t n_positions) const {
  TANDEM_CHECK(layer < keys_.size() && n_positions <= reserved_);
  kernels::KvBlocks view;
  view.keys = keys_[layer].data();
  view.values = keys_only_ ? keys_[layer].data() : values_[layer].data();
  view.table = kSingleBlock;
  view.block_rows = reserved_;
  view.n_blocks = 1;
  view.type = type_;
  return view;
}

void DenseKvCache::set_length(size_t n) {
  TANDEM_CHECK(n <= reserved_);
  length_ = n;
}

size_t DenseKvCache::allocated_bytes() const {
  return (keys_only_ ? 1 : 2) * keys_.size() * reserved_ * kv_dim_ * kernels::kv_type_bytes(type_);
}

}  // namespace tandem::runtime
