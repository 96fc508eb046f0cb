// SpecialTokenMatcher: finds control/user-defined/unknown token texts in input (longest match).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/vocab.h"

namespace tandem::tokenizer {

// A byte trie over the texts of the vocabulary's control, unknown and user-defined tokens.
// Immutable after construction; any thread may call split().
class SpecialTokenMatcher {
 public:
  explicit SpecialTokenMatcher(const Vocab& vocab);

  // One piece of input: either plain text (id < 0) or a matched token.
  struct Fragment {
    std::string_view text;
    int32_t id = -1;
  };

  // Splits `text` into fragments. At each position the longest token text that starts there is
  // taken; user-defined tokens always, control and unknown tokens only with `parse_special`.
  void split(std::string_view text, bool parse_special, std::vector<Fragment>& out) const;

 private:
  struct Node {
    int32_t always_id = -1;   // user-defined token ending here
    int32_t special_id = -1;  // control/unknown token ending here
  };
  int32_t child(int32_t node, uint8_t byte) const {
    auto it = edges_.find((static_cast<uint64_t>(node) << 8) | byte);
    return it == edges_.end() ? -1 : it->second;
  }

  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> edges_;
  std::array<bool, 256> first_always_{};   // a user-defined token starts with this byte
  std::array<bool, 256> first_special_{};  // a control/unknown token starts with this byte
};

}  // namespace tandem::tokenizer
