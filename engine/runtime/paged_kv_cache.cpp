// KvPool (one block pool, allocated once) and PagedKvCache (a sequence's view through its block
// table, with copy-on-write of shared blocks).
#include "engine/runtime/paged_kv_cache.h"

#include <algorithm>
#include <limits>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include "base/check.h"

namespace tandem::runtime {
namespace {

static_assert(std::is_same_v<BlockId, int32_t>, "kernels::KvBlocks tables hold BlockIds");

// a * b, or false on overflow.
bool checked_mul(size_t a, size_t b, size_t* out) {
  if (a != 0 && b > std::numeric_limits<size_t>::max() / a) return false;
  *out = a * b;
  return true;
}

}  // namespace

Result<std::unique_ptr<KvPool>> KvPool::create(size_t n_layers, size_t kv_dim, size_t block_tokens,
                                               size_t n_blocks, bool keys_only,
                                               kernels::KvType type) {
  if (n_layers == 0 || kv_dim == 0 || block_tokens == 0 || n_blocks == 0) {
    return invalid_argument_error("KV pool dimensions must be positive (layers " +
                                  std::to_string(n_layers) + ", kv_dim " + std::to_string(kv_dim) +
                                  ", block tokens " + std::to_string(block_tokens) + ", blocks " +
                                  std::to_string(n_blocks) + ")");
  }
  size_t total = 0;
  if (!checked_mul(n_layers, keys_only ? 1 : 2, &total) || !checked_mul(total, n_blocks, &total) ||
      !checked_mul(total, block_tokens, &total) || !checked_mul(total, kv_dim, &total) ||
      total > std::numeric_limits<size_t>::max() / kernels::kv_type_bytes(type)) {
    return invalid_argument_error("KV pool of " + std::to_string(n_blocks) +
                                  " blocks overflows the address space");
  }
  const size_t bytes = total * kernels::kv_type_bytes(type);
  // Default-initialised: pages are only backed by memory once written.
  std::unique_ptr<uint8_t[]> data(new (std::nothrow) uint8_t[bytes]);
  if (data == nullptr) {
    return resource_exhausted_error("cannot allocate the KV pool of " + std::to_string(bytes) +
                                    " bytes");
  }
  return std::unique_ptr<KvPool>(new KvPool(n_layers, kv_dim, block_tokens, n_blocks, keys_only,
                                            type, total, std::move(data)));
}

Result<KvBlockAllocator> make_allocator_for(const KvPool& pool) {
  TANDEM_ASSIGN_OR_RETURN(
      const int64_t per_token,
      kv_bytes_per_token(
          static_cast<int64_t>(pool.n_layers()), 1, static_cast<int64_t>(pool.kv_dim()),
          static_cast<int64_t>(kernels::kv_type_bytes(pool.type())), pool.keys_only()));
  KvBlockConfig config;
  config.block_tokens = static_cast<int64_t>(pool.block_tokens());
  config.bytes_per_token = per_token;
  config.budget_bytes = static_cast<int64_t>(pool.n_blocks()) * config.block_tokens * per_token;
  return KvBlockAllocator::create(config);
}

KvPool::KvPool(size_t n_layers, size_t kv_dim, size_t block_tokens, size_t n_blocks, bool keys_only,
               kernels::KvType type, size_t total, std::unique_ptr<uint8_t[]> data)
    : n_layers_(n_layers),
      kv_dim_(kv_dim),
      block_tokens_(block_tokens),
      n_blocks_(n_blocks),
      keys_only_(keys_only),
      type_(type),
      total_elements_(total),
      data_(std::move(data)) {}

uint8_t* KvPool::layer_keys(size_t layer) {
  TANDEM_CHECK(layer < n_layers_);
  return data_.get() + (planes() * layer) * n_blocks_ * block_bytes();
}

uint8_t* KvPool::layer_values(size_t layer) {
  TANDEM_CHECK(layer < n_layers_);
  return data_.get() + (planes() * layer + planes() - 1) * n_blocks_ * block_bytes();
}

const uint8_t* KvPool::layer_keys(size_t layer) const {
  return const_cast<KvPool*>(this)->layer_keys(layer);
}

const uint8_t* KvPool::layer_values(size_t layer) const {
  return const_cast<KvPool*>(this)->layer_values(layer);
}

Status KvPool::copy_block(BlockId src, BlockId dst) {
  TANDEM_CHECK(src >= 0 && dst >= 0 && static_cast<size_t>(src) < n_blocks_ &&
               static_cast<size_t>(dst) < n_blocks_ && src != dst);
  const size_t n = block_bytes();
  for (size_t l = 0; l < n_layers_; ++l) {
    for (size_t plane = 0; plane < planes(); ++plane) {
      uint8_t* base = plane == 0 ? layer_keys(l) : layer_values(l);
      std::copy_n(base + static_cast<size_t>(src) * n, n, base + static_cast<size_t>(dst) * n);
    }
  }
  return copy_hook_ ? copy_hook_(src, dst) : Status();
}

PagedKvCache::PagedKvCache(KvPool& pool, KvBlockAllocator& allocator, SeqId seq,
                           size_t max_positions)
    : pool_(&pool), allocator_(&allocator), seq_(seq), max_positions_(max_positions) {
  TANDEM_CHECK(allocator.block_tokens() == static_cast<int64_t>(pool.block_tokens()) &&
               allocator.total_blocks() == static_cast<int64_t>(pool.n_blocks()));
  const auto table = allocator.block_table(seq);
  table_.assign(table.begin(), table.end());
}

PagedKvCache::~PagedKvCache() {
  allocator_->free_sequence(seq_);
}

size_t PagedKvCache::prepared() const {
  return std::min(max_positions_, table_.size() * pool_->block_tokens());
}

Status PagedKvCache::prepare_write(size_t start_pos, size_t end_pos) {
  TANDEM_CHECK(start_pos <= end_pos);
  if (end_pos > max_positions_) {
    return out_of_range_error("sequence needs " + std::to_string(end_pos) +
                              " positions; the context limit is " + std::to_string(max_positions_));
  }
  const size_t bt = pool_->block_tokens();
  const size_t covered = static_cast<size_t>(allocator_->sequence_tokens(seq_));
  // Blocks already in the table that [start_pos, end_pos) would write must be private. A shared
  // partial last block is exempt when the sequence grows: grow() replaces it with a copy.
  size_t check_end = std::min(end_pos, covered);
  if (end_pos > covered && covered % bt != 0) check_end = std::min(check_end, covered / bt * bt);
  const auto current = allocator_->block_table(seq_);
  for (size_t b = start_pos / bt; b * bt < check_end && b < current.size(); ++b) {
    if (!allocator_->writable(current[b])) {
      return failed_precondition_error(
          "cannot rewrite position " + std::to_string(std::max(start_pos, b * bt)) +
          ": its KV block is shared with another sequence or held by the prefix cache");
    }
  }
  Status copied;  // the first error of the pool's copy hook (the blocks stay taken)
  if (end_pos > covered) {
    std::vector<KvBlockCopy> copies;
    TANDEM_RETURN_IF_ERROR(allocator_->grow(seq_, static_cast<int64_t>(end_pos), &copies));
    for (const KvBlockCopy& c : copies) {
      Status s = pool_->copy_block(c.src, c.dst);
      if (copied.ok()) copied = std::move(s);
    }
  }
  const auto table = allocator_->block_table(seq_);
  table_.assign(table.begin(), table.end());
  return copied;
}

void PagedKvCache::write(size_t layer, size_t start_pos, std::span<const float> k_rows,
                         std::span<const float> v_rows) {
  const size_t dim = pool_->kv_dim();
  const size_t bt = pool_->block_tokens();
  const bool keys_only = pool_->keys_only();
  TANDEM_CHECK(layer < pool_->n_layers() && v_rows.size() == (keys_only ? 0 : k_rows.size()));
  TANDEM_CHECK(k_rows.size() % dim == 0);
  const size_t n = k_rows.size() / dim;
  TANDEM_CHECK(start_pos + n <= prepared());
  const kernels::KvType type = pool_->type();
  const size_t elem = kernels::kv_type_bytes(type);
  uint8_t* keys = pool_->layer_keys(layer);
  uint8_t* values = pool_->layer_values(layer);
  size_t done = 0;
  while (done < n) {
    const size_t p = start_pos + done;
    const BlockId block = table_[p / bt];
    TANDEM_CHECK(allocator_->writable(block));  // prepare_write made it private
    const size_t rows = std::min(n - done, bt - p % bt);
    const size_t offset = (static_cast<size_t>(block) * bt + p % bt) * dim * elem;
    kernels::store_kv_elements(type, k_rows.data() + done * dim, keys + offset, rows * dim);
    if (!keys_only) {
      kernels::store_kv_elements(type, v_rows.data() + done * dim, values + offset, rows * dim);
    }
    done += rows;
  }
}

kernels::KvBlocks PagedKvCache::blocks(size_t layer, size_t n_positions) const {
  TANDEM_CHECK(layer < pool_->n_layers() && n_positions <= prepared());
  kernels::KvBlocks view;
  view.keys = pool_->layer_keys(layer);
  view.values = pool_->layer_values(layer);
  view.table = table_;
  view.block_rows = pool_->block_tokens();
  view.n_blocks = pool_->n_blocks();
  view.type = pool_->type();
  return view;
}

void PagedKvCache::set_length(size_t n) {
  TANDEM_CHECK(n <= prepared());
  length_ = n;
}

}  // namespace tandem::runtime
