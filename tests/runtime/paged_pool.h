// Test helper: a KV block pool and its allocator for paged-cache forward passes.
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/runtime/kv_block_allocator.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/paged_kv_cache.h"

namespace tandem::runtime::testing {

struct PagedPool {
  std::unique_ptr<KvPool> pool;
  std::unique_ptr<KvBlockAllocator> allocator;
};

// A pool of the given shape and its allocator.
inline PagedPool make_pool_of(size_t n_layers, size_t kv_dim, size_t block_tokens, size_t n_blocks,
                              bool keys_only, kernels::KvType type) {
  auto pool = KvPool::create(n_layers, kv_dim, block_tokens, n_blocks, keys_only, type);
  REQUIRE(pool.ok());
  auto allocator = make_allocator_for(**pool);
  REQUIRE(allocator.ok());
  return PagedPool{std::move(pool).value(),
                   std::make_unique<KvBlockAllocator>(std::move(allocator).value())};
}

// n_blocks blocks of block_tokens positions for `runner`'s model, of its KV element type, keys
// only for MLA (kv_dim 0 = the model's; another value makes a pool shaped for another model).
// Every layer, sliding-window ones included.
inline PagedPool make_pool(const ModelRunner& runner, size_t block_tokens, size_t n_blocks,
                           size_t kv_dim = 0) {
  const auto probe = runner.new_kv_cache(1);
  if (kv_dim == 0) kv_dim = probe->kv_dim();
  return make_pool_of(probe->n_layers(), kv_dim, block_tokens, n_blocks, probe->keys_only(),
                      runner.kv_layout().type);
}

// The full-attention layers of `runner`'s model only (KvLayerLayout::n_full), as a Scheduler's
// pool holds them for a model with sliding-window layers: its caches are
// runner.wrap_kv_cache(a PagedKvCache of it).
inline PagedPool make_full_layer_pool(const ModelRunner& runner, size_t block_tokens,
                                      size_t n_blocks) {
  const KvLayerLayout& layout = runner.kv_layout();
  return make_pool_of(layout.n_full, runner.spec().kv_dim(), block_tokens, n_blocks,
                      runner.spec().kv_value_dim() == 0, layout.type);
}

}  // namespace tandem::runtime::testing
