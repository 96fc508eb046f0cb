// HostDenseExecutor (test-only): a device-style DenseExecutor on the host. It keeps its own copy
// of the KV pool, addressed only through the batch's block tables and KV slots as a device
// executor's mirror is, and computes with the CpuDenseExecutor (single-threaded) over caches that
// are views of that mirror: the runner's device path (tables, slots, copy-on-write hook) with the
// CPU recipe, so its logits must equal the CPU path's bit for bit.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/check.h"
#include "engine/model/model.h"
#include "engine/runtime/cpu_dense_executor.h"
#include "engine/runtime/dense_executor.h"
#include "engine/runtime/prepared_weights.h"
#include "engine/runtime/windowed_kv_cache.h"
#include "kernels/cpu/kv_type.h"

namespace tandem::runtime::testing {

// Its KV mirror, in the pool's element type (f16 rows rounded as the pool's would be), starts as
// NaN: a row the runner forgot to have written (or a copy-on-write copy that did not reach the
// mirror) poisons the logits. fail_at injects an error at one call. With `rings` (a pool of the
// full layers of a model with sliding-window layers) it keeps those layers in rings addressed by
// the batch's ring slots and tables, as a device executor with window rings does, and mirrors the
// pool's layers only; otherwise every layer.
class HostDenseExecutor final : public DenseExecutor {
 public:
  HostDenseExecutor(const model::ModelSpec& spec, const PreparedWeights& weights, KvPool& pool,
                    kernels::MatmulActivations mode, size_t max_tokens,
                    DeviceWindowRings rings = {})
      : pool_(pool),
        cpu_(spec, weights, nullptr, mode),
        max_tokens_(max_tokens),
        rings_(rings),
        layout_(KvLayerLayout::of(spec)) {
    const size_t row = pool.kv_dim();
    keys_.assign(spec.n_layers, {});
    for (size_t l = 0; l < spec.n_layers; ++l) {
      const size_t blocks = in_ring(l) ? rings_.slots * rings_.blocks : pool.n_blocks();
      keys_[l] = nan_plane(blocks * pool.block_tokens() * row, pool.type());
    }
    values_ = keys_;
  }
  DeviceWindowRings window_rings() const override { return rings_; }

  // The call (e.g. "moe_output 1", "begin", "copy_block") that fails with INTERNAL; empty: none.
  std::string fail_at;
  size_t copies = 0;  // copy_block calls so far
  size_t passes = 0;  // begin calls so far

  KvPool* mirrored_pool() override { return &pool_; }
  size_t max_batch_tokens() const override { return max_tokens_; }

  Status begin(const DenseBatch& b) override {
    TANDEM_RETURN_IF_ERROR(fail("begin"));
    ++passes;
    slots_.assign(b.kv_slots.begin(), b.kv_slots.end());
    tables_.assign(b.tables.begin(), b.tables.end());
    ring_slots_.assign(b.ring_slots.begin(), b.ring_slots.end());
    ring_tables_.assign(b.ring_tables.begin(), b.ring_tables.end());
    if (rings_.slots > 0 &&
        (ring_slots_.size() != b.n_tokens || ring_tables_.size() != tables_.size())) {
      return invalid_argument_error("window rings: the batch carries no ring addresses");
    }
    // The sequences as the CPU executor sees them: the host caches replaced by mirror views.
    views_.clear();
    inputs_.clear();
    for (size_t s = 0; s < b.seqs.size(); ++s) {
      views_.push_back(std::make_unique<MirrorView>(*this, b.seqs[s]));
      SequenceInput in = b.host[s];
      in.cache = views_.back().get();
      inputs_.push_back(in);
    }
    DenseBatch mine = b;
    mine.host = inputs_;
    return cpu_.begin(mine);
  }
  Status attention(size_t layer) override {
    TANDEM_RETURN_IF_ERROR(fail("attention " + std::to_string(layer)));
    return cpu_.attention(layer);
  }
  Status dense_ffn(size_t layer) override {
    TANDEM_RETURN_IF_ERROR(fail("dense_ffn " + std::to_string(layer)));
    return cpu_.dense_ffn(layer);
  }
  Status moe_input(size_t layer, std::span<float> h, std::span<float> router) override {
    TANDEM_RETURN_IF_ERROR(fail("moe_input " + std::to_string(layer)));
    return cpu_.moe_input(layer, h, router);
  }
  Status moe_output(size_t layer, std::span<const float> moe_sum) override {
    TANDEM_RETURN_IF_ERROR(fail("moe_output " + std::to_string(layer)));
    return cpu_.moe_output(layer, moe_sum);
  }
  Status logits(std::span<const int32_t> rows, std::span<float> out) override {
    TANDEM_RETURN_IF_ERROR(fail("logits"));
    return cpu_.logits(rows, out);
  }

  Status copy_block(BlockId src, BlockId dst) override {
    TANDEM_RETURN_IF_ERROR(fail("copy_block"));
    ++copies;
    const size_t n = pool_.block_tokens() * pool_.kv_dim() * kernels::kv_type_bytes(pool_.type());
    for (size_t l = 0; l < keys_.size(); ++l) {
      if (in_ring(l)) continue;  // the rings are the sequences' own
      for (auto* store : {&keys_[l], &values_[l]}) {
        std::copy_n(store->data() + static_cast<size_t>(src) * n, n,
                    store->data() + static_cast<size_t>(dst) * n);
      }
    }
    return Status();
  }

 private:
  // One sequence's view of the mirror: K/V rows written at the batch's KV slots, read through its
  // block table. Only write and blocks are used by the executor.
  class MirrorView final : public KvCache {
   public:
    MirrorView(HostDenseExecutor& e, const DenseSequence& seq) : e_(e), seq_(seq) {}
    size_t n_layers() const override { return e_.keys_.size(); }
    size_t kv_dim() const override { return e_.pool_.kv_dim(); }
    bool keys_only() const override { return e_.pool_.keys_only(); }
    size_t max_positions() const override { return seq_.start_pos + seq_.n_tokens; }
    size_t length() const override { return seq_.start_pos + seq_.n_tokens; }
    Status prepare_write(size_t, size_t) override { return Status(); }
    void set_length(size_t) override {}
    void write(size_t layer, size_t start_pos, std::span<const float> k,
               std::span<const float> v) override {
      const size_t dim = kv_dim();
      const kernels::KvType type = e_.pool_.type();
      TANDEM_CHECK(start_pos == seq_.start_pos && k.size() == seq_.n_tokens * dim);
      const std::vector<int32_t>& slots = e_.in_ring(layer) ? e_.ring_slots_ : e_.slots_;
      for (size_t i = 0; i < seq_.n_tokens; ++i) {
        const size_t row =
            static_cast<size_t>(slots[seq_.first_token + i]) * dim * kernels::kv_type_bytes(type);
        kernels::store_kv_elements(type, k.data() + i * dim, e_.keys_[layer].data() + row, dim);
        if (!keys_only()) {
          kernels::store_kv_elements(type, v.data() + i * dim, e_.values_[layer].data() + row, dim);
        }
      }
    }
    kernels::KvBlocks blocks(size_t layer, size_t) const override {
      kernels::KvBlocks kv;
      kv.keys = e_.keys_[layer].data();
      kv.values = keys_only() ? kv.keys : e_.values_[layer].data();
      const bool ring = e_.in_ring(layer);
      kv.table = std::span<const int32_t>(ring ? e_.ring_tables_ : e_.tables_)
                     .subspan(seq_.table_begin, seq_.table_size);
      kv.block_rows = e_.pool_.block_tokens();
      kv.n_blocks = ring ? e_.rings_.slots * e_.rings_.blocks : e_.pool_.n_blocks();
      kv.type = e_.pool_.type();
      return kv;
    }

   private:
    HostDenseExecutor& e_;
    DenseSequence seq_;
  };

  static std::vector<uint8_t> nan_plane(size_t elements, kernels::KvType type) {
    std::vector<uint8_t> plane(elements * kernels::kv_type_bytes(type));
    const std::vector<float> nans(elements, std::nanf(""));
    kernels::store_kv_elements(type, nans.data(), plane.data(), elements);
    return plane;
  }
  bool in_ring(size_t layer) const { return rings_.slots > 0 && layout_.slot[layer] < 0; }

  Status fail(const std::string& call) const {
    return call == fail_at ? internal_error("injected failure at " + call) : Status();
  }

  KvPool& pool_;
  CpuDenseExecutor cpu_;
  size_t max_tokens_;
  DeviceWindowRings rings_;
  KvLayerLayout layout_;
  std::vector<int32_t> ring_slots_, ring_tables_;
  std::vector<std::vector<uint8_t>> keys_, values_;  // per layer, elements of the pool's type
  std::vector<int32_t> slots_, tables_;
  std::vector<std::unique_ptr<MirrorView>> views_;
  std::vector<SequenceInput> inputs_;
};

}  // namespace tandem::runtime::testing
