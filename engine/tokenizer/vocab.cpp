// Vocab loading from GGUF tokenizer.ggml.* metadata.
#include "engine/tokenizer/vocab.h"

#include <spdlog/spdlog.h>

#include "engine/model/gguf_split.h"

namespace tandem::tokenizer {

namespace {

// An optional token id key; ids outside the vocabulary are ignored with a warning (some
// converters write e.g. a padding id past the end).
Result<std::optional<int32_t>> read_token_id(const model::GgufFile& file, std::string_view key,
                                             int32_t vocab_size) {
  if (!file.contains(key)) return std::optional<int32_t>();
  TANDEM_ASSIGN_OR_RETURN(int64_t id, file.get_i64(key));
  if (id < 0 || id >= vocab_size) {
    spdlog::warn("{}: {} = {} is outside the vocabulary of {} tokens; ignored", file.name(), key,
                 id, vocab_size);
    return std::optional<int32_t>();
  }
  return std::optional<int32_t>(static_cast<int32_t>(id));
}

}  // namespace

Result<Vocab> Vocab::from_gguf(const model::GgufFile& file) {
  // A later shard of a split model carries no tokenizer: name the shard to open instead.
  TANDEM_RETURN_IF_ERROR(model::check_not_later_gguf_shard(file));
  Vocab vocab;
  TANDEM_ASSIGN_OR_RETURN(std::string_view model_name, file.get_string("tokenizer.ggml.model"));
  vocab.model_name = std::string(model_name);
  if (model_name == "gpt2") {
    vocab.kind = TokenizerKind::kByteLevelBpe;
  } else if (model_name == "llama") {
    vocab.kind = TokenizerKind::kSentencePiece;
  } else {
    return unimplemented_error(file.name() + ": tokenizer.ggml.model '" + vocab.model_name +
                               "' is not supported (supported: gpt2, llama)");
  }
  TANDEM_ASSIGN_OR_RETURN(std::string_view pre,
                          file.get_string_or("tokenizer.ggml.pre", "default"));
  vocab.pre_name = std::string(pre);

  TANDEM_ASSIGN_OR_RETURN(auto tokens, file.get_string_array("tokenizer.ggml.tokens"));
  if (tokens.empty() || tokens.size() > static_cast<size_t>(INT32_MAX)) {
    return invalid_argument_error(file.name() + ": tokenizer.ggml.tokens has " +
                                  std::to_string(tokens.size()) + " entries");
  }
  const auto n = static_cast<int32_t>(tokens.size());
  vocab.tokens.assign(tokens.begin(), tokens.end());

  vocab.types.assign(tokens.size(), TokenType::kNormal);
  if (file.contains("tokenizer.ggml.token_type")) {
    TANDEM_ASSIGN_OR_RETURN(auto types, file.get_i64_array("tokenizer.ggml.token_type"));
    if (types.size() != tokens.size()) {
      return invalid_argument_error(file.name() + ": tokenizer.ggml.token_type has " +
                                    std::to_string(types.size()) + " entries for " +
                                    std::to_string(n) + " tokens");
    }
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] < 1 || types[i] > 6) {
        return invalid_argument_error(file.name() + ": tokenizer.ggml.token_type[" +
                                      std::to_string(i) + "] = " + std::to_string(types[i]) +
                                      " is not a token type (1..6)");
      }
      vocab.types[i] = static_cast<TokenType>(types[i]);
    }
  }
  if (file.contains("tokenizer.ggml.scores")) {
    TANDEM_ASSIGN_OR_RETURN(vocab.scores, file.get_f32_array("tokenizer.ggml.scores"));
    if (vocab.scores.size() != tokens.size()) {
      return invalid_argument_error(file.name() + ": tokenizer.ggml.scores has " +
                                    std::to_string(vocab.scores.size()) + " entries for " +
                                    std::to_string(n) + " tokens");
    }
  } else if (vocab.kind == TokenizerKind::kSentencePiece) {
    return invalid_argument_error(file.name() +
                                  ": tokenizer.ggml.scores is required for a 'llama' tokenizer");
  }
  if (vocab.kind == TokenizerKind::kByteLevelBpe) {
    TANDEM_ASSIGN_OR_RETURN(auto merges, file.get_string_array("tokenizer.ggml.merges"));
    vocab.merges_storage.assign(merges.begin(), merges.end());
    vocab.merges.assign(vocab.merges_storage.begin(), vocab.merges_storage.end());
  }

  vocab.token_to_id.reserve(tokens.size());
  for (int32_t i = 0; i < n; ++i) vocab.token_to_id.emplace(vocab.tokens[i], i);

  TANDEM_ASSIGN_OR_RETURN(vocab.bos_id, read_token_id(file, "tokenizer.ggml.bos_token_id", n));
  TANDEM_ASSIGN_OR_RETURN(vocab.eos_id, read_token_id(file, "tokenizer.ggml.eos_token_id", n));
  TANDEM_ASSIGN_OR_RETURN(vocab.unk_id, read_token_id(file, "tokenizer.ggml.unknown_token_id", n));
  TANDEM_ASSIGN_OR_RETURN(vocab.pad_id, read_token_id(file, "tokenizer.ggml.padding_token_id", n));
  const bool spm = vocab.kind == TokenizerKind::kSentencePiece;
  // Defaults follow the tokenizer family: SPM adds BOS and the space prefix, byte-level BPE not.
  TANDEM_ASSIGN_OR_RETURN(vocab.add_bos, file.get_bool_or("tokenizer.ggml.add_bos_token", spm));
  TANDEM_ASSIGN_OR_RETURN(vocab.add_eos, file.get_bool_or("tokenizer.ggml.add_eos_token", false));
  TANDEM_ASSIGN_OR_RETURN(vocab.add_space_prefix,
                          file.get_bool_or("tokenizer.ggml.add_space_prefix", spm));
  if (!spm) vocab.add_space_prefix = false;
  TANDEM_ASSIGN_OR_RETURN(std::string_view chat_template,
                          file.get_string_or("tokenizer.chat_template", ""));
  vocab.chat_template = std::string(chat_template);
  TANDEM_ASSIGN_OR_RETURN(std::string_view arch, file.get_string_or("general.architecture", ""));
  const std::string context_key = std::string(arch) + ".context_length";
  if (!arch.empty() && file.contains(context_key)) {
    TANDEM_ASSIGN_OR_RETURN(vocab.context_length, file.get_i64(context_key));
  }
  return vocab;
}

}  // namespace tandem::tokenizer
