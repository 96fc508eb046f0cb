// BpeModel: heap-ordered BPE merges over a linked list of symbols, O(n log n) per word.
#include "engine/tokenizer/bpe_model.h"

#include <algorithm>
#include <functional>

#include "engine/tokenizer/utf8.h"

namespace tandem::tokenizer {

namespace {

// GPT-2's table: printable Latin-1 bytes stand for themselves; the other 68 bytes map, in byte
// order, to U+0100, U+0101, ...
std::array<uint32_t, 256> make_byte_code_points() {
  std::array<uint32_t, 256> cps{};
  uint32_t extra = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    cps[b] = printable ? b : 256 + extra++;
  }
  return cps;
}

const std::array<uint32_t, 256>& byte_code_points() {
  static const std::array<uint32_t, 256> cps = make_byte_code_points();
  return cps;
}

}  // namespace

const std::array<std::string, 256>& BpeModel::byte_to_char() {
  static const std::array<std::string, 256> chars = [] {
    std::array<std::string, 256> out;
    for (int b = 0; b < 256; ++b) append_utf8(byte_code_points()[b], out[b]);
    return out;
  }();
  return chars;
}

int BpeModel::char_to_byte(uint32_t cp) {
  static const std::array<int16_t, 512> table = [] {
    std::array<int16_t, 512> t{};
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[byte_code_points()[b]] = static_cast<int16_t>(b);
    return t;
  }();
  return cp < table.size() ? table[cp] : -1;
}

Result<BpeModel> BpeModel::create(const Vocab& vocab, bool ignore_merges) {
  BpeModel model;
  model.vocab_ = &vocab;
  model.ignore_merges_ = ignore_merges;
  for (int b = 0; b < 256; ++b) model.byte_token_[b] = vocab.find(byte_to_char()[b]).value_or(-1);
  size_t capacity = 2;
  int bits = 1;
  while (capacity < 2 * vocab.merges.size() + 2) {
    capacity *= 2;
    ++bits;
  }
  model.merges_.assign(capacity, Merge{kEmpty, 0, 0});
  model.shift_ = 64 - bits;
  std::string joined;
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string_view merge = vocab.merges[rank];
    // "A B": A never contains a space (spaces are mapped to U+0120), so split at the first one.
    const size_t space = merge.find(' ', 1);
    if (space == std::string_view::npos) continue;
    const std::string_view left = merge.substr(0, space);
    const std::string_view right = merge.substr(space + 1);
    const auto left_id = vocab.find(left);
    const auto right_id = vocab.find(right);
    joined.assign(left);
    joined.append(right);
    const auto result = vocab.find(joined);
    if (!left_id || !right_id || !result) continue;
    // The first (lowest-rank) occurrence of a pair wins.
    const uint64_t pair = key(*left_id, *right_id);
    size_t slot = (pair * 0x9E3779B97F4A7C15ull) >> model.shift_;
    while (model.merges_[slot].key != kEmpty && model.merges_[slot].key != pair) {
      slot = (slot + 1) & (capacity - 1);
    }
    if (model.merges_[slot].key == kEmpty) {
      model.merges_[slot] = Merge{pair, static_cast<int32_t>(rank), *result};
    }
  }
  return model;
}

void BpeModel::encode_word(std::string_view word, BpeScratch& s, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  const auto& chars = byte_to_char();
  if (word.size() == 1) {
    const int32_t id = byte_token_[static_cast<uint8_t>(word[0])];
    if (id >= 0) out.push_back(id);
    return;
  }
  if (ignore_merges_) {
    s.mapped.clear();
    for (char c : word) s.mapped.append(chars[static_cast<uint8_t>(c)]);
    if (auto id = vocab_->find(s.mapped)) {
      out.push_back(*id);
      return;
    }
  }
  const auto n = static_cast<int32_t>(word.size());
  s.ids.resize(n);
  s.prev.resize(n);
  s.next.resize(n);
  s.heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    s.ids[i] = byte_token_[static_cast<uint8_t>(word[i])];
    s.prev[i] = i - 1;
    s.next[i] = i + 1 < n ? i + 1 : -1;
  }
  // Min-heap on (rank, position): the lowest-ranked pair first, the leftmost among equals.
  const auto later = [](const BpeScratch::Pair& a, const BpeScratch::Pair& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  const auto try_push = [&](int32_t pos) {
    const int32_t right = s.next[pos];
    if (pos < 0 || right < 0 || s.ids[pos] < 0 || s.ids[right] < 0) return;
    const Merge* merge = find_merge(key(s.ids[pos], s.ids[right]));
    if (merge == nullptr) return;
    s.heap.push_back({merge->rank, pos, s.ids[pos], s.ids[right], merge->result});
    std::push_heap(s.heap.begin(), s.heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < n; ++i) try_push(i);
  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), later);
    const BpeScratch::Pair top = s.heap.back();
    s.heap.pop_back();
    // Stale entries: a side was merged since the pair was pushed. A symbol that was merged away
    // has ids == -2; a merged symbol has a new id, so the id check catches both.
    const int32_t right = s.next[top.pos];
    if (s.ids[top.pos] != top.left || right < 0 || s.ids[right] != top.right) continue;
    s.ids[top.pos] = top.result;
    s.ids[right] = -2;
    s.next[top.pos] = s.next[right];
    if (s.next[right] >= 0) s.prev[s.next[right]] = top.pos;
    if (s.prev[top.pos] >= 0) try_push(s.prev[top.pos]);
    try_push(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = s.next[i]) {
    if (s.ids[i] >= 0) out.push_back(s.ids[i]);
    // A byte whose character is not in the vocabulary has no token and is dropped.
  }
}

}  // namespace tandem::tokenizer
