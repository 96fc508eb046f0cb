// KvPrefixIndex: the prefix cache's table of cached blocks (exactly checked hash chain) and LRU.
#include "engine/runtime/kv_prefix_index.h"

#include <algorithm>

#include "base/check.h"

namespace tandem::runtime {
namespace {

// splitmix64's finaliser: spreads every input bit over the output.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

KvPrefixIndex::KvPrefixIndex(int64_t num_blocks, int64_t block_tokens)
    : block_tokens_(block_tokens),
      entries_(static_cast<size_t>(num_blocks)),
      tokens_(static_cast<size_t>(num_blocks * block_tokens)) {
  TANDEM_CHECK(num_blocks > 0 && block_tokens > 0);
}

const KvPrefixIndex::Entry& KvPrefixIndex::entry(BlockId block) const {
  TANDEM_CHECK(block >= 0 && static_cast<size_t>(block) < entries_.size());
  return entries_[static_cast<size_t>(block)];
}

KvPrefixIndex::Entry& KvPrefixIndex::entry(BlockId block) {
  TANDEM_CHECK(block >= 0 && static_cast<size_t>(block) < entries_.size());
  return entries_[static_cast<size_t>(block)];
}

uint64_t KvPrefixIndex::key_of(PrefixParent parent, std::span<const TokenId> tokens) const {
  uint64_t h = mix(static_cast<uint64_t>(static_cast<uint32_t>(parent.block)) ^
                   (parent.generation << 32) ^ 0x9e3779b97f4a7c15ULL);
  for (const TokenId t : tokens) h = mix(h ^ static_cast<uint32_t>(t));
  return h;
}

std::span<const TokenId> KvPrefixIndex::tokens_of(BlockId block) const {
  return std::span<const TokenId>(tokens_).subspan(
      static_cast<size_t>(block) * static_cast<size_t>(block_tokens_),
      static_cast<size_t>(block_tokens_));
}

uint64_t KvPrefixIndex::content_hash(BlockId block) const {
  const Entry& e = entry(block);
  TANDEM_CHECK(e.cached);
  return e.content_hash;
}

PrefixParent KvPrefixIndex::handle(BlockId block) const {
  const Entry& e = entry(block);
  TANDEM_CHECK(e.cached);
  return PrefixParent{block, e.generation};
}

BlockId KvPrefixIndex::find(PrefixParent parent, std::span<const TokenId> tokens) const {
  TANDEM_CHECK(static_cast<int64_t>(tokens.size()) == block_tokens_);
  auto it = by_key_.find(key_of(parent, tokens));
  if (it == by_key_.end()) return -1;
  const Entry& e = entry(it->second);
  if (e.parent != parent ||
      !std::equal(tokens.begin(), tokens.end(), tokens_of(it->second).begin())) {
    return -1;  // a hash collision: another content owns the slot
  }
  return it->second;
}

bool KvPrefixIndex::current(PrefixParent parent) const {
  if (parent.block < 0) return true;
  const Entry& e = entry(parent.block);
  return e.cached && e.generation == parent.generation;
}

bool KvPrefixIndex::insert(PrefixParent parent, uint64_t parent_hash,
                           std::span<const TokenId> tokens, BlockId block) {
  TANDEM_CHECK(static_cast<int64_t>(tokens.size()) == block_tokens_);
  Entry& e = entry(block);
  TANDEM_CHECK(!e.cached);
  const uint64_t key = key_of(parent, tokens);
  if (!by_key_.emplace(key, block).second) return false;
  e.cached = true;
  e.generation = next_generation_++;
  e.key = key;
  e.parent = parent;
  uint64_t chain = parent.block < 0 ? 0x243f6a8885a308d3ULL : parent_hash;
  for (const TokenId t : tokens) chain = mix(chain ^ static_cast<uint32_t>(t));
  e.content_hash = chain;
  std::copy(tokens.begin(), tokens.end(),
            tokens_.begin() + static_cast<ptrdiff_t>(block) * block_tokens_);
  ++cached_;
  return true;
}

void KvPrefixIndex::erase(BlockId block) {
  Entry& e = entry(block);
  TANDEM_CHECK(e.cached && !e.in_lru);
  by_key_.erase(e.key);
  e.cached = false;
  --cached_;
}

void KvPrefixIndex::push_unused(BlockId block) {
  Entry& e = entry(block);
  TANDEM_CHECK(e.cached && !e.in_lru);
  e.in_lru = true;
  e.prev = newest_;
  e.next = -1;
  if (newest_ >= 0) entry(newest_).next = block;
  newest_ = block;
  if (oldest_ < 0) oldest_ = block;
  ++unused_;
}

void KvPrefixIndex::remove_unused(BlockId block) {
  Entry& e = entry(block);
  TANDEM_CHECK(e.in_lru);
  if (e.prev >= 0) {
    entry(e.prev).next = e.next;
  } else {
    oldest_ = e.next;
  }
  if (e.next >= 0) {
    entry(e.next).prev = e.prev;
  } else {
    newest_ = e.prev;
  }
  e.in_lru = false;
  e.prev = e.next = -1;
  --unused_;
}

BlockId KvPrefixIndex::pop_oldest_unused() {
  const BlockId block = oldest_;
  if (block >= 0) remove_unused(block);
  return block;
}

}  // namespace tandem::runtime
