// Vocab: the token table of a tokenizer (texts, types, scores, special ids) read from GGUF.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "engine/model/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode_normalizer.h"

namespace tandem::tokenizer {

// Owns copies of every token text (so it outlives the GgufFile). Immutable after load; any thread
// may read it.
struct Vocab {
  TokenizerKind kind = TokenizerKind::kByteLevelBpe;
  std::string model_name;  // tokenizer.ggml.model
  std::string pre_name;    // tokenizer.ggml.pre ("default" when absent)
  std::vector<std::string> tokens;
  std::vector<TokenType> types;
  std::vector<float> scores;  // empty for byte-level BPE
  // Views into `tokens`; for duplicate texts the lowest id wins.
  std::unordered_map<std::string_view, int32_t> token_to_id;
  std::vector<std::string_view> merges;  // views into `merges_storage`
  std::vector<std::string> merges_storage;

  std::optional<int32_t> bos_id;
  std::optional<int32_t> eos_id;
  std::optional<int32_t> unk_id;
  std::optional<int32_t> pad_id;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // SPM only
  // tokenizer.json ByteLevel(add_prefix_space=true): a space is put before every text fragment
  // that does not start with one (byte-level BPE only; never set from GGUF).
  bool byte_level_prefix_space = false;
  // tokenizer.json Metaspace(prepend_scheme="first"): only a fragment at the very start of the
  // text gets the space prefix, not those after special tokens.
  bool space_prefix_first_only = false;
  // tokenizer.json NFC/NFD/NFKC/NFKD normalizer: applied to each text fragment between special
  // tokens, before the space prefix and pre-tokenizer (never set from GGUF).
  UnicodeForm unicode_form = UnicodeForm::kNone;
  std::string chat_template;   // tokenizer.chat_template; empty when absent
  int64_t context_length = 0;  // <arch>.context_length when present (for exporters), else 0

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  std::optional<int32_t> find(std::string_view text) const {
    auto it = token_to_id.find(text);
    if (it == token_to_id.end()) return std::nullopt;
    return it->second;
  }

  // Reads and validates the tokenizer.ggml.* keys. INVALID_ARGUMENT for missing or inconsistent
  // keys, UNIMPLEMENTED for an unknown tokenizer model.
  static Result<Vocab> from_gguf(const model::GgufFile& file);
};

}  // namespace tandem::tokenizer
