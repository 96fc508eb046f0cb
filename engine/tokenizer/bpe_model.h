// BpeModel: byte-level BPE (GPT-2 byte<->unicode map, ranked merges) over one pre-tokenized word.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "engine/tokenizer/vocab.h"

namespace tandem::tokenizer {

// Reusable per-call buffers for BpeModel::encode_word (one per encode() call, never shared).
struct BpeScratch {
  std::vector<int32_t> ids;
  std::vector<int32_t> prev;
  std::vector<int32_t> next;
  std::string mapped;
  struct Pair {
    int32_t rank;
    int32_t pos;
    int32_t left;
    int32_t right;
    int32_t result;
  };
  std::vector<Pair> heap;
};

// Holds a pointer to the Vocab, which must outlive it. Immutable after create(); any thread may
// call encode_word with its own scratch.
class BpeModel {
 public:
  // Resolves every merge "A B" to (id(A), id(B)) -> (rank, id(AB)). Merges whose parts or result
  // are not tokens are skipped (they can never apply). `ignore_merges`: a word that is a token
  // as a whole is emitted directly (Llama 3 / tiktoken behaviour).
  static Result<BpeModel> create(const Vocab& vocab, bool ignore_merges);

  // Appends the ids of `word` (raw UTF-8 bytes of one pre-tokenized piece).
  void encode_word(std::string_view word, BpeScratch& scratch, std::vector<int32_t>& out) const;

  // GPT-2 byte map: the character (UTF-8) that stands for byte b, and back.
  static const std::array<std::string, 256>& byte_to_char();
  // The byte that code point `cp` stands for, or -1.
  static int char_to_byte(uint32_t cp);

 private:
  // Open-addressing table (linear probing) of pair key -> merge; empty slots have kEmpty.
  struct Merge {
    uint64_t key;
    int32_t rank;
    int32_t result;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  const Merge* find_merge(uint64_t pair) const {
    size_t slot = (pair * 0x9E3779B97F4A7C15ull) >> shift_;
    while (true) {
      const Merge& m = merges_[slot];
      if (m.key == pair) return &m;
      if (m.key == kEmpty) return nullptr;
      slot = (slot + 1) & (merges_.size() - 1);
    }
  }
  static uint64_t key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  const Vocab* vocab_ = nullptr;
  bool ignore_merges_ = false;
  std::array<int32_t, 256> byte_token_{};  // -1 when the byte's character is not a token
  std::vector<Merge> merges_;              // size: a power of two, at most half full
  int shift_ = 63;
};

}  // namespace tandem::tokenizer
