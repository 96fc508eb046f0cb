// KvBlockAllocator: fixed-size KV blocks with reference counts and copy-on-write.
#include "engine/runtime/kv_block_allocator.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "base/check.h"

namespace tandem::runtime {
namespace {

bool mul_overflows(int64_t a, int64_t b, int64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

}  // namespace

Result<int64_t> kv_bytes_per_token(int64_t layers, int64_t kv_heads, int64_t head_dim,
                                   int64_t element_bytes, bool keys_only) {
  if (layers <= 0 || kv_heads <= 0 || head_dim <= 0 || element_bytes <= 0) {
    return invalid_argument_error("kv bytes per token: layers (" + std::to_string(layers) +
                                  "), kv heads (" + std::to_string(kv_heads) + "), head dim (" +
                                  std::to_string(head_dim) + ") and element bytes (" +
                                  std::to_string(element_bytes) + ") must all be positive");
  }
  int64_t bytes = keys_only ? 1 : 2;  // K and V
  if (mul_overflows(bytes, layers, &bytes) || mul_overflows(bytes, kv_heads, &bytes) ||
      mul_overflows(bytes, head_dim, &bytes) || mul_overflows(bytes, element_bytes, &bytes)) {
    return invalid_argument_error("kv bytes per token overflows 64 bits");
  }
  return bytes;
}

int64_t kv_blocks_for_tokens(int64_t tokens, int64_t block_tokens) {
  TANDEM_CHECK(block_tokens > 0);
  if (tokens <= 0) return 0;
  return tokens / block_tokens + (tokens % block_tokens != 0 ? 1 : 0);
}

Result<KvBlockAllocator> KvBlockAllocator::create(const KvBlockConfig& config) {
  if (config.block_tokens <= 0 || config.bytes_per_token <= 0 || config.budget_bytes <= 0) {
    return invalid_argument_error(
        "kv cache: budget bytes (" + std::to_string(config.budget_bytes) + "), block tokens (" +
        std::to_string(config.block_tokens) + ") and bytes per token (" +
        std::to_string(config.bytes_per_token) + ") must all be positive");
  }
  int64_t block_bytes = 0;
  if (mul_overflows(config.block_tokens, config.bytes_per_token, &block_bytes)) {
    return invalid_argument_error("kv cache: block size in bytes overflows 64 bits");
  }
  const int64_t num_blocks = config.budget_bytes / block_bytes;
  if (num_blocks == 0) {
    return invalid_argument_error("kv cache: budget of " + std::to_string(config.budget_bytes) +
                                  " bytes holds no block of " + std::to_string(block_bytes) +
                                  " bytes (" + std::to_string(config.block_tokens) + " tokens)");
  }
  if (num_blocks > std::numeric_limits<BlockId>::max()) {
    return invalid_argument_error("kv cache: " + std::to_string(num_blocks) +
                                  " blocks exceed the block id range; use larger blocks");
  }
  return KvBlockAllocator(config.block_tokens, block_bytes, num_blocks, config.prefix_caching);
}

KvBlockAllocator::KvBlockAllocator(int64_t block_tokens, int64_t block_bytes, int64_t num_blocks,
                                   bool prefix_caching)
    : block_tokens_(block_tokens), block_bytes_(block_bytes), ref_counts_(num_blocks, 0) {
  free_list_.reserve(static_cast<size_t>(num_blocks));
  for (int64_t i = num_blocks - 1; i >= 0; --i) free_list_.push_back(static_cast<BlockId>(i));
  if (prefix_caching) index_ = std::make_unique<KvPrefixIndex>(num_blocks, block_tokens);
}

int64_t KvBlockAllocator::sequence_tokens(SeqId seq) const {
  auto it = tables_.find(seq);
  return it == tables_.end() ? 0 : it->second.tokens;
}

std::span<const BlockId> KvBlockAllocator::block_table(SeqId seq) const {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return {};
  return it->second.blocks;
}

int64_t KvBlockAllocator::sole_blocks(SeqId seq) const {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return 0;
  return std::count_if(it->second.blocks.begin(), it->second.blocks.end(),
                       [this](BlockId b) { return ref_counts_[static_cast<size_t>(b)] == 1; });
}

int32_t KvBlockAllocator::ref_count(BlockId block) const {
  TANDEM_CHECK(block >= 0 && block < total_blocks());
  return ref_counts_[static_cast<size_t>(block)];
}

bool KvBlockAllocator::writable(BlockId block) const {
  return ref_count(block) == 1 && !(index_ && index_->is_cached(block));
}

bool KvBlockAllocator::last_needs_copy(const Table& table) const {
  // The first written position lands in a block we already hold when the table ends mid-block;
  // if that block is shared (or cached, hence immutable) it must be copied first.
  return table.tokens % block_tokens_ != 0 && !writable(table.blocks.back());
}

int64_t KvBlockAllocator::blocks_needed(SeqId seq, int64_t tokens) const {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return kv_blocks_for_tokens(tokens, block_tokens_);
  const Table& table = it->second;
  if (tokens <= table.tokens) return 0;
  const int64_t have = static_cast<int64_t>(table.blocks.size());
  return kv_blocks_for_tokens(tokens, block_tokens_) - have + (last_needs_copy(table) ? 1 : 0);
}

BlockId KvBlockAllocator::take_free_block() {
  BlockId block = -1;
  if (!free_list_.empty()) {
    block = free_list_.back();
    free_list_.pop_back();
  } else {
    // Evict the least recently used cached block nobody holds.
    TANDEM_CHECK(index_ != nullptr);
    block = index_->pop_oldest_unused();
    TANDEM_CHECK(block >= 0);
    record_removed(block);
    index_->erase(block);
    ++evictions_;
  }
  TANDEM_CHECK(ref_counts_[block] == 0);
  ref_counts_[block] = 1;
  return block;
}

void KvBlockAllocator::release_block(BlockId block) {
  TANDEM_CHECK(ref_counts_[block] > 0);
  if (--ref_counts_[block] != 0) return;
  if (index_ && index_->is_cached(block)) {
    index_->push_unused(block);  // kept for a later request with the same prefix
  } else {
    free_list_.push_back(block);
  }
}

PrefixMatch KvBlockAllocator::match_prefix(std::span<const TokenId> tokens) const {
  PrefixMatch match;
  if (!index_) return match;
  PrefixParent parent;
  const auto bt = static_cast<size_t>(block_tokens_);
  for (size_t start = 0; start + bt <= tokens.size(); start += bt) {
    const BlockId block = index_->find(parent, tokens.subspan(start, bt));
    if (block < 0) break;
    match.blocks.push_back(block);
    if (ref_counts_[block] == 0) ++match.unreferenced;
    parent = index_->handle(block);
  }
  return match;
}

Status KvBlockAllocator::adopt_prefix(SeqId seq, std::span<const BlockId> blocks, int64_t tokens) {
  const auto n = static_cast<int64_t>(blocks.size());
  if (tables_.count(seq) != 0) {
    return invalid_argument_error("kv adopt: sequence " + std::to_string(seq) + " already exists");
  }
  if (n == 0 || tokens <= (n - 1) * block_tokens_ || tokens > n * block_tokens_) {
    return invalid_argument_error("kv adopt: " + std::to_string(tokens) + " tokens do not fit " +
                                  std::to_string(n) + " blocks of " +
                                  std::to_string(block_tokens_));
  }
  for (const BlockId block : blocks) {
    if (!index_ || block < 0 || block >= total_blocks() || !index_->is_cached(block)) {
      return invalid_argument_error("kv adopt: block " + std::to_string(block) +
                                    " is not in the prefix cache");
    }
  }
  Table table;
  table.blocks.assign(blocks.begin(), blocks.end());
  table.tokens = tokens;
  table.committed = tokens / block_tokens_;
  if (table.committed > 0) {
    const BlockId last = blocks[static_cast<size_t>(table.committed - 1)];
    table.parent = index_->handle(last);
    table.parent_hash = index_->content_hash(last);
  }
  for (const BlockId block : blocks) {
    if (ref_counts_[block]++ == 0) index_->remove_unused(block);
  }
  tables_.emplace(seq, std::move(table));
  return Status();
}

void KvBlockAllocator::commit(SeqId seq, std::span<const TokenId> tokens) {
  if (!index_) return;
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  Table& table = it->second;
  const auto bt = static_cast<size_t>(block_tokens_);
  const int64_t full =
      std::min<int64_t>(static_cast<int64_t>(tokens.size()), table.tokens) / block_tokens_;
  for (; table.committed < full && !table.chain_broken; ++table.committed) {
    // The canonical copy chained through may have been evicted (this sequence held its own
    // duplicate): nothing after it can be found again, so nothing more is registered.
    if (!index_->current(table.parent)) {
      table.chain_broken = true;
      break;
    }
    const auto i = static_cast<size_t>(table.committed);
    const std::span<const TokenId> content = tokens.subspan(i * bt, bt);
    const BlockId existing = index_->find(table.parent, content);
    if (existing >= 0) {  // the same content is cached already: chain on through that copy
      table.parent = index_->handle(existing);
      table.parent_hash = index_->content_hash(existing);
      continue;
    }
    const BlockId block = table.blocks[i];
    const bool first = table.parent.block < 0;
    if (index_->is_cached(block) ||
        !index_->insert(table.parent, table.parent_hash, content, block)) {
      table.chain_broken = true;  // a hash slot held by another content (a collision)
      break;
    }
    if (events_enabled_) {
      KvEvent stored;
      stored.kind = KvEvent::Kind::kStored;
      stored.block_hash = static_cast<int64_t>(index_->content_hash(block));
      if (!first) stored.parent_hash = static_cast<int64_t>(table.parent_hash);
      stored.token_ids.assign(content.begin(), content.end());
      events_.push_back(std::move(stored));
    }
    table.parent = index_->handle(block);
    table.parent_hash = index_->content_hash(block);
  }
}

int64_t KvBlockAllocator::drop_unreferenced_cache() {
  if (!index_) return 0;
  int64_t dropped = 0;
  const size_t events_before = events_.size();
  for (BlockId block = index_->pop_oldest_unused(); block >= 0;
       block = index_->pop_oldest_unused()) {
    record_removed(block);
    index_->erase(block);
    free_list_.push_back(block);
    ++dropped;
  }
  if (events_enabled_ && index_->cached() == 0 && dropped > 0) {
    // Everything is gone: one "cleared" says it for all the removals.
    events_.resize(events_before);
    KvEvent cleared;
    cleared.kind = KvEvent::Kind::kCleared;
    events_.push_back(std::move(cleared));
  }
  return dropped;
}

Status KvBlockAllocator::grow(SeqId seq, int64_t tokens, std::vector<KvBlockCopy>* copies) {
  const int64_t current = sequence_tokens(seq);
  if (tokens < current) {
    return invalid_argument_error("kv grow: sequence " + std::to_string(seq) + " holds " +
                                  std::to_string(current) + " tokens; cannot shrink to " +
                                  std::to_string(tokens));
  }
  const int64_t need = blocks_needed(seq, tokens);
  if (need > free_blocks()) {
    return resource_exhausted_error("kv grow: sequence " + std::to_string(seq) + " needs " +
                                    std::to_string(need) + " blocks, " +
                                    std::to_string(free_blocks()) + " free");
  }
  Table& table = tables_[seq];
  if (tokens == table.tokens) return Status();
  if (last_needs_copy(table)) {
    const BlockId shared = table.blocks.back();
    const BlockId fresh = take_free_block();
    release_block(shared);
    table.blocks.back() = fresh;
    if (copies != nullptr) copies->push_back({shared, fresh});
  }
  const int64_t want = kv_blocks_for_tokens(tokens, block_tokens_);
  while (static_cast<int64_t>(table.blocks.size()) < want) {
    table.blocks.push_back(take_free_block());
  }
  table.tokens = tokens;
  return Status();
}

Status KvBlockAllocator::fork(SeqId parent, SeqId child) {
  auto it = tables_.find(parent);
  if (it == tables_.end()) {
    return invalid_argument_error("kv fork: unknown parent sequence " + std::to_string(parent));
  }
  if (tables_.count(child) != 0) {
    return invalid_argument_error("kv fork: child sequence " + std::to_string(child) +
                                  " already exists");
  }
  Table copy = it->second;
  for (BlockId block : copy.blocks) ++ref_counts_[block];
  tables_.emplace(child, std::move(copy));
  return Status();
}

void KvBlockAllocator::free_sequence(SeqId seq) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  // Release in reverse so that a sequence's blocks come back in their original order.
  for (auto block = it->second.blocks.rbegin(); block != it->second.blocks.rend(); ++block) {
    release_block(*block);
  }
  tables_.erase(it);
}

void KvBlockAllocator::record_removed(BlockId block) {
  if (!events_enabled_) return;
  KvEvent removed;
  removed.kind = KvEvent::Kind::kRemoved;
  removed.block_hash = static_cast<int64_t>(index_->content_hash(block));
  events_.push_back(std::move(removed));
}

std::vector<KvEvent> KvBlockAllocator::take_events() {
  return std::exchange(events_, {});
}

Status KvBlockAllocator::check_invariants() const {
  std::vector<int64_t> counted(ref_counts_.size(), 0);
  for (const auto& [seq, table] : tables_) {
    if (static_cast<int64_t>(table.blocks.size()) !=
        kv_blocks_for_tokens(table.tokens, block_tokens_)) {
      return internal_error("kv: sequence " + std::to_string(seq) + " has " +
                            std::to_string(table.blocks.size()) + " blocks for " +
                            std::to_string(table.tokens) + " tokens");
    }
    for (BlockId block : table.blocks) {
      if (block < 0 || block >= total_blocks()) {
        return internal_error("kv: block id " + std::to_string(block) + " out of range");
      }
      ++counted[static_cast<size_t>(block)];
    }
  }
  std::vector<bool> in_free(ref_counts_.size(), false);
  for (BlockId block : free_list_) {
    if (block < 0 || block >= total_blocks() || in_free[static_cast<size_t>(block)]) {
      return internal_error("kv: free list holds a bad or duplicate block " +
                            std::to_string(block));
    }
    if (index_ && index_->is_cached(block)) {
      return internal_error("kv: free-list block " + std::to_string(block) + " is still cached");
    }
    in_free[static_cast<size_t>(block)] = true;
  }
  int64_t unused = 0;
  for (BlockId block = 0; index_ && block < total_blocks(); ++block) {
    const bool lru = index_->in_unused(block);
    if (lru != (index_->is_cached(block) && ref_counts_[static_cast<size_t>(block)] == 0)) {
      return internal_error("kv: cached block " + std::to_string(block) + " with ref count " +
                            std::to_string(ref_counts_[static_cast<size_t>(block)]) +
                            (lru ? " is" : " is not") + " on the LRU list");
    }
    if (lru) {
      in_free[static_cast<size_t>(block)] = true;
      ++unused;
    }
  }
  if (index_ && unused != index_->unused()) {
    return internal_error("kv: the LRU list counts " + std::to_string(index_->unused()) +
                          " blocks, " + std::to_string(unused) + " are on it");
  }
  for (size_t i = 0; i < ref_counts_.size(); ++i) {
    if (counted[i] != ref_counts_[i]) {
      return internal_error("kv: block " + std::to_string(i) + " has ref count " +
                            std::to_string(ref_counts_[i]) + " but " + std::to_string(counted[i]) +
                            " references");
    }
    if ((ref_counts_[i] == 0) != in_free[i]) {
      return internal_error("kv: block " + std::to_string(i) + " free-list membership disagrees " +
                            "with its ref count " + std::to_string(ref_counts_[i]));
    }
  }
  return Status();
}

}  // namespace tandem::runtime
