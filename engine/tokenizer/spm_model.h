// SpmModel: SentencePiece-style BPE over token scores with <0xNN> byte fallback.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "engine/tokenizer/vocab.h"

namespace tandem::tokenizer {

// Reusable per-call buffers for SpmModel::encode (one per encode() call, never shared).
struct SpmScratch {
  struct Symbol {
    int32_t start;  // byte offset in the text
    int32_t length;
    int32_t prev;
    int32_t next;
  };
  struct Bigram {
    float score;
    int32_t left;
    int32_t length;  // combined length when pushed; stale when it no longer matches
    int32_t id;
  };
  std::vector<Symbol> symbols;
  std::vector<Bigram> heap;
};

// Holds a pointer to the Vocab, which must outlive it. Immutable after create(); any thread may
// call encode with its own scratch.
class SpmModel {
 public:
  static Result<SpmModel> create(const Vocab& vocab);

  // Appends the ids of `text`, which is already escaped (spaces as U+2581, prefix added) and
  // valid UTF-8. Adjacent pieces merge while their concatenation is a normal or user-defined
  // token, highest score first (leftmost among equals). A leftover character that is not a token
  // becomes its <0xNN> byte tokens, or the unknown token when the vocabulary has no byte tokens.
  void encode(std::string_view text, SpmScratch& scratch, std::vector<int32_t>& out) const;

  // The byte that byte token `id` stands for, or -1 for other tokens.
  int byte_of_token(int32_t id) const;

 private:
  std::optional<int32_t> mergeable(std::string_view text) const;
  void encode_segment(std::string_view text, SpmScratch& scratch, std::vector<int32_t>& out) const;

  const Vocab* vocab_ = nullptr;
  std::array<int32_t, 256> byte_token_{};  // -1 when <0xNN> is missing
  // No mergeable token holds U+2581 after another character (SentencePiece's whitespace
  // splitting): then no merge crosses the start of a U+2581 run, and each run-delimited segment
  // is merged on its own, with the same result and a small heap.
  bool split_at_space_ = false;
};

}  // namespace tandem::tokenizer
