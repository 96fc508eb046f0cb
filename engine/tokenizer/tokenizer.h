// Tokenizer: text <-> token ids for byte-level BPE and SentencePiece-style BPE vocabularies,
// plus StreamingDetokenizer for incremental, UTF-8-safe decoding. The tokenizer module's public
// header.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace tandem::model {
class GgufFile;
}  // namespace tandem::model

namespace tandem::tokenizer {

// tokenizer.ggml.token_type values.
enum class TokenType : uint8_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class TokenizerKind {
  kByteLevelBpe,   // tokenizer.ggml.model "gpt2": regex pre-tokenizer, merges, GPT-2 byte map
  kSentencePiece,  // tokenizer.ggml.model "llama": score-ordered merges, <0xNN> byte fallback
};

struct EncodeOptions {
  // Prepend BOS / append EOS when the vocabulary asks for it (add_bos_token / add_eos_token).
  bool add_special = false;
  // Match control (and unknown) tokens written in the text, e.g. "<|im_start|>", as single
  // tokens. User-defined tokens are always matched as single tokens, as added tokens are.
  bool parse_special = false;
};

struct DecodeOptions {
  // Leave out control and unknown tokens (BOS, EOS, <|im_start|>, <unk>, ...).
  bool skip_special = false;
  // SentencePiece vocabularies with a space prefix: drop the leading space of the first text
  // token, so that decode(encode(x)) == x.
  bool strip_space_prefix = true;
};

struct Vocab;
class PreTokenizer;
class BpeModel;
class SpmModel;
class SpecialTokenMatcher;

// Encoding:
//   1. Invalid UTF-8 in the input is not an error: every maximal ill-formed subsequence is
//      replaced by U+FFFD (as the Unicode standard recommends) before tokenizing.
//   2. The text is split at special tokens (longest match wins at each position; see
//      EncodeOptions::parse_special); those become their ids.
//   3. A tokenizer.json NFC/NFD/NFKC/NFKD normalizer (ICU) is applied to each remaining text
//      fragment on its own, as HF tokenizers does (special tokens are not normalized), so
//      decode(encode(x)) gives the normalized text.
//   4. Each remaining text fragment is tokenized: byte-level BPE splits it with the
//      pre-tokenizer's regexes and runs BPE on each word's bytes mapped with the GPT-2 byte
//      table; SentencePiece replaces ' ' by U+2581, prepends U+2581 (add_space_prefix) to the
//      first fragment and to every fragment following a special token, merges by score and
//      falls back to <0xNN> byte tokens.
//   Merging is O(n log n) in the word length (a heap over adjacent pairs plus a linked list), so
//   any input, however long and without spaces, tokenizes in bounded time.
//
// Decoding concatenates each token's bytes (byte-level BPE maps characters back to bytes;
// SentencePiece turns U+2581 into ' ' and <0xNN> into the byte; control, unknown and
// user-defined tokens give their text) and replaces any ill-formed UTF-8 by U+FFFD, so the
// result is always valid UTF-8.
//
// Immutable after loading; encode() and decode() may be called from any thread concurrently.
// Move-only; the GgufFile it was loaded from may be closed afterwards.
class Tokenizer {
 public:
  // Reads tokenizer.ggml.* metadata. INVALID_ARGUMENT for missing/inconsistent keys,
  // UNIMPLEMENTED for an unsupported model or pre-tokenizer.
  static Result<Tokenizer> from_gguf(const model::GgufFile& file);
  // Opens `path` (a GGUF, vocab-only or full) and reads its tokenizer.
  static Result<Tokenizer> load_gguf(const std::string& path);
  // Reads a Hugging Face tokenizer directory: tokenizer.json (required) and, when present,
  // tokenizer_config.json (bos/eos/pad/unk tokens, add_bos_token/add_eos_token, chat_template).
  // See hf_tokenizer_json.h for what is supported; the rest is UNIMPLEMENTED with its name.
  static Result<Tokenizer> load_hf(const std::string& dir);
  // The same from the two files' contents; `config_json` may be empty. `name` prefixes errors.
  static Result<Tokenizer> from_hf_json(std::string_view tokenizer_json,
                                        std::string_view config_json, const std::string& name);
  // Internal: a tokenizer from loaded parts (the GGUF and tokenizer.json loaders). `pre` is
  // required for byte-level BPE and ignored for SentencePiece.
  static Result<Tokenizer> from_parts(std::unique_ptr<Vocab> vocab,
                                      std::unique_ptr<PreTokenizer> pre, bool ignore_merges);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Fails only when the regex engine runs out of resources (RESOURCE_EXHAUSTED) or ICU
  // normalization fails (INTERNAL).
  Result<std::vector<int32_t>> encode(std::string_view text, const EncodeOptions& options) const;
  // INVALID_ARGUMENT when an id is outside the vocabulary.
  Result<std::string> decode(std::span<const int32_t> ids, const DecodeOptions& options) const;

  // The raw bytes that token `id` stands for (may be part of a UTF-8 sequence). Empty for a
  // control/unknown token when `skip_special`. INVALID_ARGUMENT for an id outside the vocabulary.
  Result<std::string> token_bytes(int32_t id, bool skip_special) const;

  TokenizerKind kind() const;
  // tokenizer.ggml.pre for GGUF; for tokenizer.json the named pre-tokenizer whose regexes the
  // Split/ByteLevel steps are (e.g. "gpt-4o"), else "tokenizer.json"; "default" for SentencePiece.
  const std::string& pre_tokenizer_name() const;
  int32_t vocab_size() const;
  // Token text as stored in the vocabulary; id must be in [0, vocab_size()).
  std::string_view token_text(int32_t id) const;
  TokenType token_type(int32_t id) const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> unk_id() const;
  std::optional<int32_t> pad_id() const;
  bool add_bos() const;
  bool add_eos() const;
  bool add_space_prefix() const;
  // tokenizer.chat_template / tokenizer_config.json's chat_template; empty when absent.
  const std::string& chat_template() const;

 private:
  Tokenizer();
  Status encode_fragment(std::string_view text, bool after_special,
                         std::vector<int32_t>& out) const;

  std::unique_ptr<Vocab> vocab_;
  std::unique_ptr<PreTokenizer> pre_;
  std::unique_ptr<BpeModel> bpe_;
  std::unique_ptr<SpmModel> spm_;
  std::unique_ptr<SpecialTokenMatcher> specials_;
};

// Turns a stream of token ids into text one id at a time. Each feed() returns only complete
// UTF-8 characters; bytes of a character that is not finished yet (a CJK character or emoji
// split across byte tokens) are held back until the tokens that complete it arrive. Ill-formed
// bytes become U+FFFD, exactly where decode() would put them: the concatenation of all feed()
// results and flush() equals decode() of all ids with the same options.
//
// Holds a reference to the Tokenizer, which must outlive it. Not thread-safe: one request's
// thread owns it.
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, DecodeOptions options = {});

  // The newly completed text. INVALID_ARGUMENT for an id outside the vocabulary (the stream is
  // unchanged then).
  Result<std::string> feed(int32_t id);
  // Ends the stream: held-back bytes of an unfinished character become U+FFFD. The object can
  // then be reused for a new stream.
  std::string flush();
  // Bytes currently held back (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  std::string pending_;
  bool at_start_ = true;
};

}  // namespace tandem::tokenizer
