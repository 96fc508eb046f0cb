// PreTokenizer: splits text into words with the split regexes of a named GGUF pre-tokenizer.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace tandem::tokenizer {

class Pcre2Regex;

// What a split does with the pieces its pattern matches (Hugging Face's SplitDelimiterBehavior).
enum class SplitBehavior {
  kIsolated,            // matches and gaps are separate pieces
  kRemoved,             // matches are dropped
  kMergedWithPrevious,  // a match is appended to the piece before it
  kMergedWithNext,      // a match is prepended to the piece after it
  kContiguous,          // adjacent matches form one piece
};

// One split step: a PCRE2 pattern (or a literal string) and what to do with its matches.
struct SplitRule {
  std::string pattern;
  bool literal = false;  // `pattern` is a plain string, not a regex
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;  // the gaps between matches are the delimiters instead
};

// The regex sequence named by `tokenizer.ggml.pre`. Each regex splits every current piece into
// its matches and the gaps between them (HF's Split with behaviour "Isolated"); the pieces of one
// regex are the input of the next. Compiled once with PCRE2 (UTF, UCP, JIT).
//
// Every rule of a named pre-tokenizer is kIsolated, not inverted.
//
// Supported names: "gpt-2" (alias "gpt2"), "qwen2", "qwen35", "llama-bpe" (alias "llama3"),
// "gpt-4o" (the o200k pattern of gpt-oss), "deepseek-llm", "deepseek-coder"; others are
// UNIMPLEMENTED.
//
// Immutable after create(); split() may be called from any thread concurrently.
class PreTokenizer {
 public:
  static Result<PreTokenizer> create(std::string_view name);
  // A pre-tokenizer from explicit rules (e.g. a tokenizer.json Split sequence), called `name`.
  // INVALID_ARGUMENT when a pattern does not compile. No rules: the text is one piece.
  static Result<PreTokenizer> from_rules(std::string_view name, std::vector<SplitRule> rules);
  // The regexes of a named pre-tokenizer (see create()), in order; UNIMPLEMENTED for others.
  static Result<std::vector<std::string_view>> named_patterns(std::string_view name);
  // The name (see create(), never an alias) whose regexes `rules` are exactly: the same patterns,
  // in order, all regexes, kIsolated and not inverted. nullopt when no named pre-tokenizer is.
  static std::optional<std::string_view> name_of_rules(const std::vector<SplitRule>& rules);

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
  std::vector<SplitRule> rules_;  // one per regex
};

}  // namespace tandem::tokenizer
