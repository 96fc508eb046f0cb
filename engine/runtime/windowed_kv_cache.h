// WindowedKvCache: a sequence's KV cache for a model with sliding-window layers (GPT-OSS): the
// full-attention layers live in an inner KvCache (dense or paged), the windowed layers only keep
// the positions a query can still see, in a small ring of blocks owned by the cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/model/model_spec.h"
#include "engine/runtime/device_ring_slots.h"
#include "engine/runtime/kv_cache.h"

namespace tandem::runtime {

// Which layers keep every position and which only a window. slot[l] is layer l's index in the
// full-layer cache, or -1 for a windowed layer. A plain value.
struct KvLayerLayout {
  std::vector<int32_t> slot;
  size_t n_full = 0;  // layers with slot >= 0
  size_t window = 0;  // positions a windowed layer's query sees (itself included)
  // The element type of every layer's K/V rows (the runner's RunnerOptions::kv_type; of()
  // leaves f32).
  kernels::KvType type = kernels::KvType::kF32;

  // From the spec: windowed layers are spec.windowed(l) when spec.sliding_window > 0.
  static KvLayerLayout of(const model::ModelSpec& spec);
  size_t n_layers() const { return slot.size(); }
  size_t n_windowed() const { return slot.size() - n_full; }
};

// Positions per block of a WindowedKvCache's ring unless told otherwise.
inline constexpr size_t kWindowRingBlockRows = 16;

// Ring positions a windowed layer needs for a pass of `pass_tokens` tokens: window - 1 earlier
// positions plus the pass, in whole blocks of block_rows, plus one block of alignment slack.
size_t window_ring_positions(size_t window, size_t pass_tokens, size_t block_rows);

// Blocks of block_rows positions in a device executor's ring of one windowed layer for passes of up
// to pass_tokens tokens: position p lives in ring block (p / block_rows) % blocks. Enough for the
// window - 1 earlier positions and the pass, and never fewer positions than a WindowedKvCache's own
// ring (block rows kWindowRingBlockRows) holds, so that what the host ring still holds, the device
// ring holds too (a rewind the host accepts reads nothing the device overwrote).
size_t device_window_ring_blocks(size_t window, size_t pass_tokens, size_t block_rows);

// Bytes (K and V) the windowed layers of one sequence hold at most for passes of up to pass_tokens
// tokens: n_windowed x window_ring_positions x kv_dim x 2 x kv_type_bytes(layout.type).
size_t window_ring_bytes(const KvLayerLayout& layout, size_t kv_dim, size_t pass_tokens,
                         size_t block_rows);

// Position p of a windowed layer lives in ring block (p / block_rows) % ring_blocks(); a pass
// that writes [start, end) needs positions [max(0, start - window + 1), end) at once, so the ring
// grows (re-laid out, never shrinking) to cover window - 1 + the pass; blocks that fall out of
// every future query's window are overwritten. Its read view (blocks()) is a KvBlocks whose table
// entries for positions that are no longer held are -1 (the attention kernel reads only the
// window). Full layers are forwarded to the inner cache at their slot.
// Errors: prepare_write fails with FAILED_PRECONDITION (nothing changed) when a rewind (start_pos
// below length()) needs window positions the ring has already overwritten; the inner cache's
// errors otherwise (then the ring is unchanged too). Threads: as KvCache.
class WindowedKvCache final : public KvCache {
 public:
  // `full` holds layout.n_full layers of kv_dim (null only when n_full == 0); max_positions is the
  // context limit (the inner cache's when there is one).
  WindowedKvCache(std::unique_ptr<KvCache> full, KvLayerLayout layout, size_t kv_dim,
                  size_t max_positions, size_t block_rows = kWindowRingBlockRows);

  size_t n_layers() const override { return layout_.n_layers(); }
  size_t kv_dim() const override { return kv_dim_; }
  size_t max_positions() const override { return max_positions_; }
  size_t length() const override { return length_; }
  Status prepare_write(size_t start_pos, size_t end_pos) override;
  void write(size_t layer, size_t start_pos, std::span<const float> k_rows,
             std::span<const float> v_rows) override;
  kernels::KvBlocks blocks(size_t layer, size_t n_positions) const override;
  void set_length(size_t n) override;

  // The full-layer cache (null when every layer is windowed).
  KvCache* full_layers() { return full_.get(); }
  const KvCache* full_layers() const { return full_.get(); }
  size_t ring_blocks() const { return owner_.size(); }
  // Bytes of the windowed layers' rings (K and V).
  size_t ring_bytes() const;
  // The ring a device dense executor keeps for this sequence's windowed layers (ModelRunner sets
  // it when it wraps the cache for such an executor); -1 when none.
  void set_device_ring(std::unique_ptr<DeviceRingLease> lease) { device_ring_ = std::move(lease); }
  int32_t device_ring() const { return device_ring_ != nullptr ? device_ring_->slot() : -1; }

 private:
  void grow_ring(size_t n_blocks, size_t keep_from_block);
  void claim(size_t block);

  std::unique_ptr<KvCache> full_;
  KvLayerLayout layout_;
  std::vector<int32_t> ring_of_layer_;  // per model layer: index into keys_/values_, or -1
  size_t kv_dim_;
  size_t max_positions_;
  size_t block_rows_;
  size_t length_ = 0;
  size_t prepared_ = 0;         // end of the last prepare_write
  std::vector<int64_t> owner_;  // per ring block: the position block it holds, -1 = none
  // Per windowed layer: ring_blocks x rows x dim elements of layout_.type.
  std::vector<std::vector<uint8_t>> keys_, values_;
  std::vector<int32_t> table_;  // position block -> ring block, or -1
  std::unique_ptr<DeviceRingLease> device_ring_;
};

}  // namespace tandem::runtime
