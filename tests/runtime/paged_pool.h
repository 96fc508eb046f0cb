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

// n_blocks blocks of block_tokens positions for `runner`'s model, of its KV element type (kv_dim 0
// = the model's; another value makes a pool shaped for another model).
inline PagedPool make_pool(const ModelRunner& runner, size_t block_tokens, size_t n_blocks,
                           size_t kv_dim = 0, bool keys_only = false) {
  const auto probe = runner.new_kv_cache(1);
  if (kv_dim == 0) kv_dim = probe->kv_dim();
  auto pool = KvPool::create(probe->n_layers(), kv_dim, block_tokens, n_blocks, keys_only,
                             runner.kv_layout().type);
  REQUIRE(pool.ok());
  auto allocator = make_allocator_for(**pool);
  REQUIRE(allocator.ok());
  return PagedPool{std::move(pool).value(),
                   std::make_unique<KvBlockAllocator>(std::move(allocator).value())};
}

}  // namespace tandem::runtime::testing
