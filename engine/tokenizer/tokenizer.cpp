// Tokenizer: loading from GGUF, encode (special-token split, pre-tokenize, BPE/SPM), decode.
#include "engine/tokenizer/tokenizer.h"

#include "base/check.h"
#include "engine/model/gguf_file.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/special_token_matcher.h"
#include "engine/tokenizer/spm_model.h"
#include "engine/tokenizer/unicode_normalizer.h"
#include "engine/tokenizer/utf8.h"
#include "engine/tokenizer/vocab.h"

namespace tandem::tokenizer {

namespace {
constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK
}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::from_gguf(const model::GgufFile& file) {
  TANDEM_ASSIGN_OR_RETURN(Vocab vocab, Vocab::from_gguf(file));
  auto owned = std::make_unique<Vocab>(std::move(vocab));
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  bool ignore_merges = false;
  if (owned->kind == TokenizerKind::kByteLevelBpe) {
    auto pre = PreTokenizer::create(owned->pre_name);
    if (!pre.ok()) return pre.status().with_prefix(file.name());
    pre_tokenizer = std::make_unique<PreTokenizer>(std::move(pre).value());
    // Llama 3 follows tiktoken: a word that is a token as a whole is not merged step by step.
    ignore_merges = owned->pre_name == "llama-bpe" || owned->pre_name == "llama3";
  }
  return from_parts(std::move(owned), std::move(pre_tokenizer), ignore_merges);
}

Result<Tokenizer> Tokenizer::from_parts(std::unique_ptr<Vocab> vocab,
                                        std::unique_ptr<PreTokenizer> pre, bool ignore_merges) {
  TANDEM_CHECK(vocab != nullptr);
  Tokenizer tok;
  tok.vocab_ = std::move(vocab);
  if (tok.vocab_->kind == TokenizerKind::kByteLevelBpe) {
    TANDEM_CHECK(pre != nullptr);
    tok.pre_ = std::move(pre);
    TANDEM_ASSIGN_OR_RETURN(BpeModel bpe, BpeModel::create(*tok.vocab_, ignore_merges));
    tok.bpe_ = std::make_unique<BpeModel>(std::move(bpe));
  } else {
    TANDEM_ASSIGN_OR_RETURN(SpmModel spm, SpmModel::create(*tok.vocab_));
    tok.spm_ = std::make_unique<SpmModel>(std::move(spm));
  }
  tok.specials_ = std::make_unique<SpecialTokenMatcher>(*tok.vocab_);
  return tok;
}

Result<Tokenizer> Tokenizer::load_gguf(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(model::GgufFile file, model::GgufFile::open(path));
  return from_gguf(file);
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text,
                                               const EncodeOptions& options) const {
  std::string sanitized;
  if (!is_valid_utf8(text)) {
    sanitized = sanitize_utf8(text);
    text = sanitized;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (options.add_special && vocab_->add_bos && vocab_->bos_id) ids.push_back(*vocab_->bos_id);

  std::vector<SpecialTokenMatcher::Fragment> fragments;
  specials_->split(text, options.parse_special, fragments);
  bool after_special = true;  // the start of the text counts as following a special token
  for (const auto& fragment : fragments) {
    if (fragment.id >= 0) {
      ids.push_back(fragment.id);
      after_special = !vocab_->space_prefix_first_only;
      continue;
    }
    TANDEM_RETURN_IF_ERROR(encode_fragment(fragment.text, after_special, ids));
    after_special = false;
  }
  if (options.add_special && vocab_->add_eos && vocab_->eos_id) ids.push_back(*vocab_->eos_id);
  return ids;
}

Status Tokenizer::encode_fragment(std::string_view text, bool after_special,
                                  std::vector<int32_t>& out) const {
  std::string normalized;
  if (vocab_->unicode_form != UnicodeForm::kNone) {
    // Valid UTF-8 here: encode() sanitized the text before splitting off special tokens.
    TANDEM_ASSIGN_OR_RETURN(normalized, normalize_unicode(vocab_->unicode_form, text));
    text = normalized;
  }
  if (bpe_) {
    std::vector<std::string_view> words;
    std::string prefixed;
    if (vocab_->byte_level_prefix_space && !text.empty() && text[0] != ' ') {
      // tokenizer.json ByteLevel(add_prefix_space): every fragment starts with a space.
      prefixed.reserve(text.size() + 1);
      prefixed.push_back(' ');
      prefixed.append(text);
      text = prefixed;
    }
    TANDEM_RETURN_IF_ERROR(pre_->split(text, words));
    BpeScratch scratch;
    for (std::string_view word : words) bpe_->encode_word(word, scratch, out);
    return Status();
  }
  std::string escaped;
  escaped.reserve(text.size() + text.size() / 4 + 3);
  if (vocab_->add_space_prefix && after_special) escaped.append(kSpmSpace);
  for (char c : text) {
    if (c == ' ') {
      escaped.append(kSpmSpace);
    } else {
      escaped.push_back(c);
    }
  }
  SpmScratch scratch;
  spm_->encode(escaped, scratch, out);
  return Status();
}

Result<std::string> Tokenizer::token_bytes(int32_t id, bool skip_special) const {
  if (id < 0 || id >= vocab_->size()) {
    return invalid_argument_error("token id " + std::to_string(id) +
                                  " is outside the vocabulary (" + std::to_string(vocab_->size()) +
                                  " tokens)");
  }
  const std::string_view text = vocab_->tokens[id];
  const TokenType type = vocab_->types[id];
  switch (type) {
    case TokenType::kControl:
    case TokenType::kUnknown:
      return skip_special ? std::string() : std::string(text);
    case TokenType::kUserDefined:
      return std::string(text);
    case TokenType::kByte:
      if (spm_) {
        const int byte = spm_->byte_of_token(id);
        if (byte >= 0) return std::string(1, static_cast<char>(byte));
      }
      break;
    case TokenType::kNormal:
    case TokenType::kUnused:
      break;
  }
  std::string out;
  if (bpe_) {
    // Map each character back to its byte; characters outside the table pass through.
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      const Utf8Step step = utf8_step(text.substr(i));
      if (step.kind != Utf8Step::kValid) {
        out.append(text.substr(i, step.length));
        i += step.length;
        continue;
      }
      size_t length = 0;
      const uint32_t cp = decode_utf8(text.substr(i), &length);
      const int byte = BpeModel::char_to_byte(cp);
      if (byte >= 0) {
        out.push_back(static_cast<char>(byte));
      } else {
        out.append(text.substr(i, length));
      }
      i += length;
    }
    return out;
  }
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, kSpmSpace.size()) == kSpmSpace) {
      out.push_back(' ');
      i += kSpmSpace.size();
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids,
                                      const DecodeOptions& options) const {
  StreamingDetokenizer stream(*this, options);
  std::string out;
  for (int32_t id : ids) {
    TANDEM_ASSIGN_OR_RETURN(std::string text, stream.feed(id));
    out.append(text);
  }
  out.append(stream.flush());
  return out;
}

TokenizerKind Tokenizer::kind() const {
  return vocab_->kind;
}
const std::string& Tokenizer::pre_tokenizer_name() const {
  return vocab_->pre_name;
}
int32_t Tokenizer::vocab_size() const {
  return vocab_->size();
}
std::string_view Tokenizer::token_text(int32_t id) const {
  TANDEM_CHECK(id >= 0 && id < vocab_->size());
  return vocab_->tokens[id];
}
TokenType Tokenizer::token_type(int32_t id) const {
  TANDEM_CHECK(id >= 0 && id < vocab_->size());
  return vocab_->types[id];
}
std::optional<int32_t> Tokenizer::bos_id() const {
  return vocab_->bos_id;
}
std::optional<int32_t> Tokenizer::eos_id() const {
  return vocab_->eos_id;
}
std::optional<int32_t> Tokenizer::unk_id() const {
  return vocab_->unk_id;
}
std::optional<int32_t> Tokenizer::pad_id() const {
  return vocab_->pad_id;
}
bool Tokenizer::add_bos() const {
  return vocab_->add_bos;
}
bool Tokenizer::add_eos() const {
  return vocab_->add_eos;
}
bool Tokenizer::add_space_prefix() const {
  return vocab_->add_space_prefix;
}
const std::string& Tokenizer::chat_template() const {
  return vocab_->chat_template;
}

}  // namespace tandem::tokenizer
