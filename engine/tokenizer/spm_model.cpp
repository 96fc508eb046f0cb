// SpmModel: score-ordered merging with a heap of adjacent bigrams over a linked list of symbols.
#include "engine/tokenizer/spm_model.h"

#include <algorithm>
#include <cstdio>

#include "engine/tokenizer/utf8.h"

namespace tandem::tokenizer {

namespace {
constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581
}  // namespace

Result<SpmModel> SpmModel::create(const Vocab& vocab) {
  SpmModel model;
  model.vocab_ = &vocab;
  model.byte_token_.fill(-1);
  char name[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto id = vocab.find(name);
    if (id && vocab.types[*id] == TokenType::kByte) model.byte_token_[b] = *id;
  }
  model.split_at_space_ = true;
  for (int32_t id = 0; id < vocab.size() && model.split_at_space_; ++id) {
    if (!model.mergeable(vocab.tokens[id])) continue;
    const std::string_view text = vocab.tokens[id];
    for (size_t p = text.find(kSpace, 1); p != std::string_view::npos;
         p = text.find(kSpace, p + 1)) {
      if (p < kSpace.size() || text.substr(p - kSpace.size(), kSpace.size()) != kSpace) {
        model.split_at_space_ = false;
        break;
      }
    }
  }
  return model;
}

int SpmModel::byte_of_token(int32_t id) const {
  if (id < 0 || id >= vocab_->size() || vocab_->types[id] != TokenType::kByte) return -1;
  const std::string_view text = vocab_->tokens[id];
  // "<0xNN>"
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    value <<= 4;
    if (c >= '0' && c <= '9') {
      value |= c - '0';
    } else if (c >= 'A' && c <= 'F') {
      value |= c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      value |= c - 'a' + 10;
    } else {
      return -1;
    }
  }
  return value;
}

std::optional<int32_t> SpmModel::mergeable(std::string_view text) const {
  auto id = vocab_->find(text);
  if (!id) return std::nullopt;
  const TokenType type = vocab_->types[*id];
  if (type != TokenType::kNormal && type != TokenType::kUserDefined) return std::nullopt;
  return id;
}

void SpmModel::encode(std::string_view text, SpmScratch& s, std::vector<int32_t>& out) const {
  if (!split_at_space_) {
    encode_segment(text, s, out);
    return;
  }
  size_t start = 0;
  for (size_t p = text.find(kSpace, 1); p != std::string_view::npos; p = text.find(kSpace, p + 1)) {
    if (p - start >= kSpace.size() && text.substr(p - kSpace.size(), kSpace.size()) != kSpace) {
      encode_segment(text.substr(start, p - start), s, out);
      start = p;
    }
  }
  encode_segment(text.substr(start), s, out);
}

void SpmModel::encode_segment(std::string_view text, SpmScratch& s,
                              std::vector<int32_t>& out) const {
  if (text.empty()) return;
  s.symbols.clear();
  s.heap.clear();
  for (size_t i = 0; i < text.size();) {
    const auto len =
        static_cast<int32_t>(std::min(utf8_length(static_cast<uint8_t>(text[i])), text.size() - i));
    const auto index = static_cast<int32_t>(s.symbols.size());
    s.symbols.push_back({static_cast<int32_t>(i), len, index - 1, -1});
    if (index > 0) s.symbols[index - 1].next = index;
    i += len;
  }
  // Max-heap on score; the leftmost among equal scores first.
  const auto lower = [](const SpmScratch::Bigram& a, const SpmScratch::Bigram& b) {
    return a.score != b.score ? a.score < b.score : a.left > b.left;
  };
  const auto try_push = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = s.symbols[left].next;
    if (right < 0) return;
    const int32_t length = s.symbols[left].length + s.symbols[right].length;
    auto id = mergeable(text.substr(s.symbols[left].start, length));
    if (!id) return;
    s.heap.push_back({vocab_->scores[*id], left, length, *id});
    std::push_heap(s.heap.begin(), s.heap.end(), lower);
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(s.symbols.size()); ++i) try_push(i);
  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), lower);
    const SpmScratch::Bigram top = s.heap.back();
    s.heap.pop_back();
    SpmScratch::Symbol& left = s.symbols[top.left];
    // Stale: the left symbol was merged away (length 0) or grew, or its neighbour changed.
    if (left.length == 0 || left.next < 0) continue;
    SpmScratch::Symbol& right = s.symbols[left.next];
    if (left.length + right.length != top.length) continue;
    left.length = top.length;
    left.next = right.next;
    if (right.next >= 0) s.symbols[right.next].prev = top.left;
    right.length = 0;
    try_push(left.prev);
    try_push(top.left);
  }
  for (int32_t i = 0; i >= 0; i = s.symbols[i].next) {
    const SpmScratch::Symbol& sym = s.symbols[i];
    const std::string_view piece = text.substr(sym.start, sym.length);
    if (auto id = mergeable(piece)) {
      out.push_back(*id);
      continue;
    }
    bool bytes_ok = true;
    for (char c : piece) bytes_ok = bytes_ok && byte_token_[static_cast<uint8_t>(c)] >= 0;
    if (bytes_ok) {
      for (char c : piece) out.push_back(byte_token_[static_cast<uint8_t>(c)]);
    } else if (vocab_->unk_id) {
      out.push_back(*vocab_->unk_id);
    }
  }
}

}  // namespace tandem::tokenizer
