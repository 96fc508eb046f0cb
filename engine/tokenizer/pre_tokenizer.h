// PreTokenizer: splits text into words with the split regexes of a named GGUF pre-tokenizer.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/result.h"

namespace tandem::tokenizer {

class Pcre2Regex;

// The regex sequence named by `tokenizer.ggml.pre`. Each regex splits every current piece into
// its matches and the gaps between them (HF's Split with behaviour "Isolated"); the pieces of one
// regex are the input of the next. Compiled once with PCRE2 (UTF, UCP, JIT).
//
// Supported names: "gpt-2", "qwen2", "qwen35", "llama-bpe" (alias "llama3"), "deepseek-llm",
// "deepseek-coder"; others are UNIMPLEMENTED.
//
// Immutable after create(); split() may be called from any thread concurrently.
class PreTokenizer {
 public:
  static Result<PreTokenizer> create(std::string_view name);

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  const std::string& name() const { return name_; }

  // Appends the pieces of `text` (valid UTF-8; not checked) to `out` as views into `text`, in
  // order, covering it completely. Fails only when PCRE2 gives up (RESOURCE_EXHAUSTED).
  Status split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  PreTokenizer() = default;
  std::string name_;
  std::vector<std::unique_ptr<Pcre2Regex>> regexes_;
};

}  // namespace tandem::tokenizer
