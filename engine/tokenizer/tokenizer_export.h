// Exporting a GGUF model's tokenizer as a Hugging Face tokenizer directory (tokenizer.json,
// tokenizer_config.json, config.json, generation_config.json).
#pragma once

#include <string>

#include "base/result.h"
#include "engine/model/gguf_file.h"

namespace tandem::tokenizer {

// The four files' contents (JSON text, UTF-8).
struct HfTokenizerFiles {
  std::string tokenizer_json;
  std::string tokenizer_config_json;
  std::string config_json;
  std::string generation_config_json;
};

// Byte-level BPE ("gpt2") vocabularies: BPE with the GGUF vocab and merges (pair form),
// pre_tokenizer Sequence[Split(Regex, Isolated) for each regex of tokenizer.ggml.pre,
// ByteLevel(use_regex=false)], ByteLevel decoder, ignore_merges for llama-bpe, and a
// TemplateProcessing post_processor when add_bos/add_eos. Control and unknown tokens become
// special added tokens, user-defined tokens non-special added tokens.
//
// SentencePiece ("llama") vocabularies: BPE with byte_fallback and merges made from the scores
// (every split of a token into two tokens, ranked by the token's score), Llama's normalizer
// (Prepend U+2581 when add_space_prefix, Replace ' ' -> U+2581), no pre-tokenizer, and the Llama
// decoder sequence.
//
// tokenizer_config.json carries bos/eos/pad/unk tokens, add_bos_token/add_eos_token,
// chat_template (tokenizer.chat_template) and model_max_length (<arch>.context_length);
// config.json and generation_config.json the bos/eos/pad ids.
//
// UNIMPLEMENTED for an unsupported tokenizer model or pre-tokenizer.
Result<HfTokenizerFiles> export_hf_tokenizer(const model::GgufFile& file);

// Writes the four files into `dir` (created if missing). Each file is replaced by renaming a
// fresh sibling over it (replace_file), so a planted symlink is replaced, never written through.
// File system errors name the path (codes as replace_file).
Status write_hf_tokenizer_dir(const HfTokenizerFiles& files, const std::string& dir);

}  // namespace tandem::tokenizer
