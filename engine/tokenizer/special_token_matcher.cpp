// SpecialTokenMatcher: trie construction and longest-match splitting.
#include "engine/tokenizer/special_token_matcher.h"

namespace tandem::tokenizer {

SpecialTokenMatcher::SpecialTokenMatcher(const Vocab& vocab) {
  nodes_.emplace_back();
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenType type = vocab.types[id];
    const bool always = type == TokenType::kUserDefined;
    const bool special = type == TokenType::kControl || type == TokenType::kUnknown;
    const std::string_view text = vocab.tokens[id];
    if ((!always && !special) || text.empty()) continue;
    int32_t node = 0;
    for (char c : text) {
      const auto byte = static_cast<uint8_t>(c);
      int32_t next = child(node, byte);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        edges_.emplace((static_cast<uint64_t>(node) << 8) | byte, next);
      }
      node = next;
    }
    // For duplicate texts the lowest id wins.
    int32_t& slot = always ? nodes_[node].always_id : nodes_[node].special_id;
    if (slot < 0) slot = id;
    (always ? first_always_ : first_special_)[static_cast<uint8_t>(text[0])] = true;
  }
}

void SpecialTokenMatcher::split(std::string_view text, bool parse_special,
                                std::vector<Fragment>& out) const {
  size_t plain_start = 0;
  size_t i = 0;
  while (i < text.size()) {
    const auto first = static_cast<uint8_t>(text[i]);
    if (!first_always_[first] && !(parse_special && first_special_[first])) {
      ++i;
      continue;
    }
    int32_t node = 0;
    int32_t best_id = -1;
    size_t best_length = 0;
    for (size_t j = i; j < text.size(); ++j) {
      node = child(node, static_cast<uint8_t>(text[j]));
      if (node < 0) break;
      const Node& n = nodes_[node];
      int32_t id = n.always_id;
      if (parse_special && n.special_id >= 0 && (id < 0 || n.special_id < id)) id = n.special_id;
      if (id >= 0) {
        best_id = id;
        best_length = j - i + 1;
      }
    }
    if (best_id < 0) {
      ++i;
      continue;
    }
    if (i > plain_start) out.push_back({text.substr(plain_start, i - plain_start), -1});
    out.push_back({text.substr(i, best_length), best_id});
    i += best_length;
    plain_start = i;
  }
  if (plain_start < text.size()) out.push_back({text.substr(plain_start), -1});
}

}  // namespace tandem::tokenizer
