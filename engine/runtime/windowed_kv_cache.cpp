// WindowedKvCache: full layers forwarded to an inner cache, windowed layers in a ring of blocks.
#include "engine/runtime/windowed_kv_cache.h"

#include <algorithm>
#include <string>
#include <utility>

#include "base/check.h"

namespace tandem::runtime {

KvLayerLayout KvLayerLayout::of(const model::ModelSpec& spec) {
  KvLayerLayout layout;
  layout.window = static_cast<size_t>(spec.sliding_window);
  layout.slot.resize(static_cast<size_t>(spec.n_layers));
  for (size_t l = 0; l < layout.slot.size(); ++l) {
    const bool windowed = spec.sliding_window > 0 && spec.windowed(l);
    layout.slot[l] = windowed ? -1 : static_cast<int32_t>(layout.n_full++);
  }
  return layout;
}

size_t window_ring_positions(size_t window, size_t pass_tokens, size_t block_rows) {
  const size_t span = (window > 0 ? window - 1 : 0) + pass_tokens;
  return ((span + block_rows - 1) / block_rows + 1) * block_rows;
}

size_t device_window_ring_blocks(size_t window, size_t pass_tokens, size_t block_rows) {
  const size_t own = window_ring_positions(window, pass_tokens, block_rows);
  const size_t host = window_ring_positions(window, pass_tokens, kWindowRingBlockRows);
  // One block more than the larger of the two: a device block may start up to block_rows - 1
  // positions before a host block, so the device overwrites a position only after the host has.
  return (std::max(own, host) + block_rows - 1) / block_rows + 1;
}

size_t window_ring_bytes(const KvLayerLayout& layout, size_t kv_dim, size_t pass_tokens,
                         size_t block_rows) {
  return layout.n_windowed() * window_ring_positions(layout.window, pass_tokens, block_rows) *
         kv_dim * 2 * kernels::kv_type_bytes(layout.type);
}

WindowedKvCache::WindowedKvCache(std::unique_ptr<KvCache> full, KvLayerLayout layout, size_t kv_dim,
                                 size_t max_positions, size_t block_rows)
    : full_(std::move(full)),
      layout_(std::move(layout)),
      kv_dim_(kv_dim),
      max_positions_(max_positions),
      block_rows_(block_rows) {
  TANDEM_CHECK(block_rows_ > 0 && layout_.window > 0);
  TANDEM_CHECK((full_ == nullptr) == (layout_.n_full == 0));
  if (full_ != nullptr) {
    TANDEM_CHECK(full_->n_layers() == layout_.n_full && full_->kv_dim() == kv_dim_);
    max_positions_ = std::min(max_positions_, full_->max_positions());
  }
  ring_of_layer_.assign(layout_.n_layers(), -1);
  int32_t ring = 0;
  for (size_t l = 0; l < layout_.n_layers(); ++l) {
    if (layout_.slot[l] < 0) ring_of_layer_[l] = ring++;
  }
  keys_.resize(static_cast<size_t>(ring));
  values_.resize(static_cast<size_t>(ring));
}

size_t WindowedKvCache::ring_bytes() const {
  return keys_.size() * owner_.size() * block_rows_ * kv_dim_ * 2 *
         kernels::kv_type_bytes(layout_.type);
}

void WindowedKvCache::grow_ring(size_t n_blocks, size_t keep_from_block) {
  const size_t block_bytes = block_rows_ * kv_dim_ * kernels::kv_type_bytes(layout_.type);
  std::vector<int64_t> owner(n_blocks, -1);
  for (size_t r = 0; r < keys_.size(); ++r) {
    std::vector<uint8_t> keys(n_blocks * block_bytes);
    std::vector<uint8_t> values(n_blocks * block_bytes);
    for (size_t s = 0; s < owner_.size(); ++s) {
      const int64_t b = owner_[s];
      if (b < static_cast<int64_t>(keep_from_block)) continue;
      const size_t to = static_cast<size_t>(b) % n_blocks;
      std::copy_n(keys_[r].data() + s * block_bytes, block_bytes, keys.data() + to * block_bytes);
      std::copy_n(values_[r].data() + s * block_bytes, block_bytes,
                  values.data() + to * block_bytes);
    }
    keys_[r] = std::move(keys);
    values_[r] = std::move(values);
  }
  for (int64_t b : owner_) {
    if (b >= static_cast<int64_t>(keep_from_block)) owner[static_cast<size_t>(b) % n_blocks] = b;
  }
  owner_ = std::move(owner);
  std::fill(table_.begin(), table_.end(), -1);
  for (size_t s = 0; s < owner_.size(); ++s) {
    if (owner_[s] >= 0 && static_cast<size_t>(owner_[s]) < table_.size()) {
      table_[static_cast<size_t>(owner_[s])] = static_cast<int32_t>(s);
    }
  }
}

void WindowedKvCache::claim(size_t block) {
  const size_t s = block % owner_.size();
  if (owner_[s] == static_cast<int64_t>(block)) return;
  if (owner_[s] >= 0) table_[static_cast<size_t>(owner_[s])] = -1;
  owner_[s] = static_cast<int64_t>(block);
  table_[block] = static_cast<int32_t>(s);
}

Status WindowedKvCache::prepare_write(size_t start_pos, size_t end_pos) {
  TANDEM_CHECK(start_pos <= end_pos);
  if (end_pos > max_positions_) {
    return out_of_range_error("sequence needs " + std::to_string(end_pos) +
                              " positions; the context limit is " + std::to_string(max_positions_));
  }
  const size_t bt = block_rows_;
  // The first position any query of this pass reads in a windowed layer; [lo, start_pos) must
  // still be in the ring.
  const size_t lo = start_pos + 1 > layout_.window ? start_pos + 1 - layout_.window : 0;
  for (size_t b = lo / bt; lo < start_pos && b <= (start_pos - 1) / bt; ++b) {
    if (owner_.empty() || owner_[b % owner_.size()] != static_cast<int64_t>(b)) {
      return failed_precondition_error(
          "cannot rewind to position " + std::to_string(start_pos) +
          ": the sliding-window layers need positions from " + std::to_string(lo) +
          ", which they no longer hold (a windowed layer keeps only its last " +
          std::to_string(layout_.window) + " positions)");
    }
  }
  if (full_ != nullptr) TANDEM_RETURN_IF_ERROR(full_->prepare_write(start_pos, end_pos));
  if (end_pos > start_pos) {
    const size_t first = lo / bt;
    const size_t last = (end_pos - 1) / bt;
    if (table_.size() < last + 1) table_.resize(last + 1, -1);
    if (last - first + 1 > owner_.size()) grow_ring(last - first + 1, first);
    for (size_t b = start_pos / bt; b <= last; ++b) claim(b);
  }
  prepared_ = end_pos;
  return Status();
}

void WindowedKvCache::write(size_t layer, size_t start_pos, std::span<const float> k_rows,
                            std::span<const float> v_rows) {
  TANDEM_CHECK(layer < layout_.n_layers() && k_rows.size() == v_rows.size());
  if (layout_.slot[layer] >= 0) {
    full_->write(static_cast<size_t>(layout_.slot[layer]), start_pos, k_rows, v_rows);
    return;
  }
  TANDEM_CHECK(k_rows.size() % kv_dim_ == 0);
  const size_t n = k_rows.size() / kv_dim_;
  TANDEM_CHECK(start_pos + n <= prepared_);
  const size_t r = static_cast<size_t>(ring_of_layer_[layer]);
  const size_t bt = block_rows_;
  const kernels::KvType type = layout_.type;
  size_t done = 0;
  while (done < n) {
    const size_t p = start_pos + done;
    const size_t s = (p / bt) % owner_.size();
    TANDEM_CHECK(owner_[s] == static_cast<int64_t>(p / bt));  // prepare_write claimed it
    const size_t rows = std::min(n - done, bt - p % bt);
    const size_t offset = (s * bt + p % bt) * kv_dim_ * kernels::kv_type_bytes(type);
    kernels::store_kv_elements(type, k_rows.data() + done * kv_dim_, keys_[r].data() + offset,
                               rows * kv_dim_);
    kernels::store_kv_elements(type, v_rows.data() + done * kv_dim_, values_[r].data() + offset,
                               rows * kv_dim_);
    done += rows;
  }
}

kernels::KvBlocks WindowedKvCache::blocks(size_t layer, size_t n_positions) const {
  TANDEM_CHECK(layer < layout_.n_layers() && n_positions <= prepared_);
  if (layout_.slot[layer] >= 0) {
    return full_->blocks(static_cast<size_t>(layout_.slot[layer]), n_positions);
  }
  const size_t r = static_cast<size_t>(ring_of_layer_[layer]);
  kernels::KvBlocks view;
  view.keys = keys_[r].data();
  view.values = values_[r].data();
  view.table = table_;
  view.block_rows = block_rows_;
  view.n_blocks = owner_.size();
  view.type = layout_.type;
  return view;
}

void WindowedKvCache::set_length(size_t n) {
  TANDEM_CHECK(n <= prepared_);
  if (full_ != nullptr) full_->set_length(n);
  length_ = n;
}

}  // namespace tandem::runtime
