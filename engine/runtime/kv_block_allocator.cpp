// KvBlockAllocator: fixed-size KV blocks with reference counts and copy-on-write.
#include "engine/runtime/kv_block_allocator.h"

#include <limits>
#include <string>

#include "engine/base/check.h"

namespace tandem::runtime {
namespace {

bool mul_overflows(int64_t a, int64_t b, int64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

}  // namespace

Result<int64_t> kv_bytes_per_token(int64_t layers, int64_t kv_heads, int64_t head_dim,
                                   int64_t element_bytes) {
  if (layers <= 0 || kv_heads <= 0 || head_dim <= 0 || element_bytes <= 0) {
    return invalid_argument_error("kv bytes per token: layers (" + std::to_string(layers) +
                                  "), kv heads (" + std::to_string(kv_heads) + "), head dim (" +
                                  std::to_string(head_dim) + ") and element bytes (" +
                                  std::to_string(element_bytes) + ") must all be positive");
  }
  int64_t bytes = 2;  // K and V
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
  return KvBlockAllocator(config.block_tokens, block_bytes, num_blocks);
}

KvBlockAllocator::KvBlockAllocator(int64_t block_tokens, int64_t block_bytes, int64_t num_blocks)
    : block_tokens_(block_tokens), block_bytes_(block_bytes), ref_counts_(num_blocks, 0) {
  free_list_.reserve(static_cast<size_t>(num_blocks));
  for (int64_t i = num_blocks - 1; i >= 0; --i) free_list_.push_back(static_cast<BlockId>(i));
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

int32_t KvBlockAllocator::ref_count(BlockId block) const {
  TANDEM_CHECK(block >= 0 && block < total_blocks());
  return ref_counts_[static_cast<size_t>(block)];
}

int64_t KvBlockAllocator::blocks_needed(SeqId seq, int64_t tokens) const {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return kv_blocks_for_tokens(tokens, block_tokens_);
  const Table& table = it->second;
  if (tokens <= table.tokens) return 0;
  const int64_t have = static_cast<int64_t>(table.blocks.size());
  int64_t need = kv_blocks_for_tokens(tokens, block_tokens_) - have;
  // The first written position lands in a block we already hold when the table ends mid-block;
  // if that block is shared it must be copied first.
  if (table.tokens % block_tokens_ != 0 && ref_counts_[table.blocks.back()] > 1) ++need;
  return need;
}

BlockId KvBlockAllocator::take_free_block() {
  TANDEM_CHECK(!free_list_.empty());
  const BlockId block = free_list_.back();
  free_list_.pop_back();
  TANDEM_CHECK(ref_counts_[block] == 0);
  ref_counts_[block] = 1;
  return block;
}

void KvBlockAllocator::release_block(BlockId block) {
  TANDEM_CHECK(ref_counts_[block] > 0);
  if (--ref_counts_[block] == 0) free_list_.push_back(block);
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
  if (table.tokens % block_tokens_ != 0 && ref_counts_[table.blocks.back()] > 1) {
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
    in_free[static_cast<size_t>(block)] = true;
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
