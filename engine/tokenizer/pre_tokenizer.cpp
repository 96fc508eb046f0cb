// PreTokenizer: the split regexes of each supported pre-tokenizer, run through PCRE2.
#include "engine/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <optional>
#include <span>
#include <string>

namespace tandem::tokenizer {

namespace {

// GPT-2's published split pattern.
constexpr std::array<std::string_view, 1> kGpt2 = {
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"};

// Llama 3 (tiktoken cl100k style): digits in groups of up to three.
constexpr std::array<std::string_view, 1> kLlama3 = {
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};

// Qwen2: as Llama 3 but single digits.
constexpr std::array<std::string_view, 1> kQwen2 = {
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};

// Qwen3.5: as Qwen2 with combining marks (\p{M}) kept inside letter runs.
constexpr std::array<std::string_view, 1> kQwen35 = {
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};

// GPT-4o (tiktoken o200k_base; gpt-oss): a word is an optional non-letter/non-digit lead, then
// either uppercase-ish letters followed by at least one lowercase-ish letter, or at least one
// uppercase-ish letter followed by lowercase-ish ones (Lm, Lo and marks count as both, so
// "CamelCase" is two words and "HTTPServer" one), then an optional contraction in any case.
// Digits in groups of up to three; punctuation runs keep trailing newlines and slashes. This is
// the pattern of gpt-oss's tokenizer.json byte for byte (also valid Oniguruma).
constexpr std::array<std::string_view, 1> kGpt4o = {
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};

// DeepSeek LLM: newlines, cased-letter runs (the published class is the Unicode cased letters,
// Lu/Ll/Lt = \p{L&}), ASCII/full-width/CJK punctuation, trailing whitespace, CJK/Hangul runs,
// digit runs.
constexpr std::array<std::string_view, 6> kDeepseekLlm = {
    R"([\r\n])",
    R"(\s?\p{L&}+)",
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)",
    R"(\s+$)",
    R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)",
    R"(\p{N}+)",
};

// DeepSeek Coder: newlines, letter runs, punctuation runs, CJK/Hangul runs, single digits.
constexpr std::array<std::string_view, 5> kDeepseekCoder = {
    R"([\r\n])",    R"(\s?\p{L}+)",
    R"(\s?\p{P}+)", R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)",
    R"(\p{N})",
};

// DeepSeek-V3 / R1 (tokenizer.json: a Sequence of three isolated Splits): digits in groups of up to
// three, then runs of CJK ideographs (U+4E00-U+9FA5), hiragana and katakana, then words (one
// leading ASCII punctuation sign may start an ASCII word), punctuation / symbol runs and
// whitespace.
constexpr std::array<std::string_view, 3> kDeepseekV3 = {
    R"(\p{N}{1,3})",
    R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)",
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)"
    R"(| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};

// Kimi-K2 (tokenization_kimi.py, tiktoken): Han runs first, then o200k-like words whose letter
// classes exclude Han (Oniguruma's [X&&[^\p{Han}]], written here as a negative lookahead before
// each letter), digits in groups of three, punctuation runs keeping trailing newlines, whitespace.
constexpr std::array<std::string_view, 1> kKimiK2 = {
    R"(\p{Han}+)"
    R"(|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*)"
    R"((?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+)"
    R"((?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};

// Every named pre-tokenizer: its tokenizer.ggml.pre name, an alias ("" for none) and its
// regexes in order. The supported list in messages is made from this table.
struct NamedPreTokenizer {
  std::string_view name;
  std::string_view alias;
  std::span<const std::string_view> patterns;
};

constexpr std::array<NamedPreTokenizer, 9> kNamed = {{
    {"gpt-2", "gpt2", kGpt2},
    {"qwen2", "", kQwen2},
    {"qwen35", "", kQwen35},
    {"llama-bpe", "llama3", kLlama3},
    {"gpt-4o", "", kGpt4o},
    {"deepseek-llm", "", kDeepseekLlm},
    {"deepseek-coder", "", kDeepseekCoder},
    {"deepseek-v3", "", kDeepseekV3},
    {"kimi-k2", "", kKimiK2},
}};

const NamedPreTokenizer* find_named(std::string_view name) {
  for (const NamedPreTokenizer& entry : kNamed) {
    if (name == entry.name || (!entry.alias.empty() && name == entry.alias)) return &entry;
  }
  return nullptr;
}

}  // namespace

void apply_behavior(const std::vector<std::string_view>& parts, const std::vector<bool>& delim,
                    SplitBehavior behavior, std::vector<std::string_view>& out);

// One compiled, JIT-ed pattern. Immutable; matching state lives in the caller's match data.
class Pcre2Regex {
 public:
  static Result<std::unique_ptr<Pcre2Regex>> compile(std::string_view pattern,
                                                     bool literal = false) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    // PCRE2_LITERAL allows only a few other options (UTF among them).
    const uint32_t options =
        literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     options, &error, &offset, nullptr);
    if (code == nullptr) {
      std::array<PCRE2_UCHAR, 256> message{};
      pcre2_get_error_message(error, message.data(), message.size());
      return invalid_argument_error("pre-tokenizer regex does not compile at offset " +
                                    std::to_string(offset) + ": " +
                                    reinterpret_cast<const char*>(message.data()));
    }
    auto regex = std::unique_ptr<Pcre2Regex>(new Pcre2Regex(code));
    regex->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    return regex;
  }

  ~Pcre2Regex() { pcre2_code_free(code_); }
  Pcre2Regex(const Pcre2Regex&) = delete;
  Pcre2Regex& operator=(const Pcre2Regex&) = delete;

  // Splits `piece` into matches and gaps and appends the pieces `rule` asks for to `out`.
  Status split(std::string_view piece, const SplitRule& rule, pcre2_match_data* match,
               pcre2_match_context* context, std::vector<std::string_view>& out) const {
    if (rule.behavior == SplitBehavior::kIsolated && !rule.invert) {
      return split_isolated(piece, match, context, out);
    }
    // Segments [start, end) covering the piece, each flagged as delimiter or not.
    std::vector<std::string_view> parts;
    std::vector<bool> is_delim;
    TANDEM_RETURN_IF_ERROR(split_isolated(piece, match, context, parts, &is_delim));
    if (rule.invert) is_delim.flip();
    apply_behavior(parts, is_delim, rule.behavior, out);
    return Status();
  }

  // Appends matches and gaps of `piece` to `out`; with `flags`, whether each one is a match.
  Status split_isolated(std::string_view piece, pcre2_match_data* match,
                        pcre2_match_context* context, std::vector<std::string_view>& out,
                        std::vector<bool>* flags = nullptr) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    size_t pos = 0;
    size_t gap_start = 0;
    while (pos < piece.size()) {
      const int rc =
          jit_ ? pcre2_jit_match(code_, subject, piece.size(), pos, 0, match, context)
               : pcre2_match(code_, subject, piece.size(), pos, PCRE2_NO_UTF_CHECK, match, context);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        std::array<PCRE2_UCHAR, 256> message{};
        pcre2_get_error_message(rc, message.data(), message.size());
        return resource_exhausted_error(std::string("pre-tokenizer regex failed: ") +
                                        reinterpret_cast<const char*>(message.data()));
      }
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
      const size_t start = ovector[0];
      const size_t end = ovector[1];
      if (end == start) {  // an empty match: step over one character
        pos = start + 1;
        while (pos < piece.size() && (static_cast<uint8_t>(piece[pos]) & 0xC0) == 0x80) ++pos;
        continue;
      }
      if (start > gap_start) {
        out.push_back(piece.substr(gap_start, start - gap_start));
        if (flags != nullptr) flags->push_back(false);
      }
      out.push_back(piece.substr(start, end - start));
      if (flags != nullptr) flags->push_back(true);
      gap_start = end;
      pos = end;
    }
    if (gap_start < piece.size()) {
      out.push_back(piece.substr(gap_start));
      if (flags != nullptr) flags->push_back(false);
    }
    return Status();
  }

  const pcre2_code* code() const { return code_; }

 private:
  explicit Pcre2Regex(pcre2_code* code) : code_(code) {}
  pcre2_code* code_;
  bool jit_ = false;
};

namespace {

// Joins two adjacent views of the same buffer.
std::string_view join_adjacent(std::string_view a, std::string_view b) {
  return std::string_view(a.data(), static_cast<size_t>(b.data() + b.size() - a.data()));
}

}  // namespace

// Hugging Face's SplitDelimiterBehavior over consecutive segments of one piece.
void apply_behavior(const std::vector<std::string_view>& parts, const std::vector<bool>& delim,
                    SplitBehavior behavior, std::vector<std::string_view>& out) {
  switch (behavior) {
    case SplitBehavior::kIsolated:
      out.insert(out.end(), parts.begin(), parts.end());
      return;
    case SplitBehavior::kRemoved:
      for (size_t i = 0; i < parts.size(); ++i) {
        if (!delim[i]) out.push_back(parts[i]);
      }
      return;
    case SplitBehavior::kMergedWithPrevious: {
      const size_t first = out.size();
      bool previous_delim = false;
      for (size_t i = 0; i < parts.size(); ++i) {
        if (delim[i] && !previous_delim && out.size() > first) {
          out.back() = join_adjacent(out.back(), parts[i]);
        } else {
          out.push_back(parts[i]);
        }
        previous_delim = delim[i];
      }
      return;
    }
    case SplitBehavior::kMergedWithNext: {
      std::vector<std::string_view> reversed;
      bool previous_delim = false;
      for (size_t i = parts.size(); i-- > 0;) {
        if (delim[i] && !previous_delim && !reversed.empty()) {
          reversed.back() = join_adjacent(parts[i], reversed.back());
        } else {
          reversed.push_back(parts[i]);
        }
        previous_delim = delim[i];
      }
      out.insert(out.end(), reversed.rbegin(), reversed.rend());
      return;
    }
    case SplitBehavior::kContiguous: {
      // Adjacent segments of the same kind join (with invert, adjacent kept matches do too).
      const size_t first = out.size();
      bool previous_delim = false;
      for (size_t i = 0; i < parts.size(); ++i) {
        if (delim[i] == previous_delim && out.size() > first) {
          out.back() = join_adjacent(out.back(), parts[i]);
        } else {
          out.push_back(parts[i]);
        }
        previous_delim = delim[i];
      }
      return;
    }
  }
}

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

Result<std::vector<std::string_view>> PreTokenizer::named_patterns(std::string_view name) {
  const NamedPreTokenizer* named = find_named(name);
  if (named == nullptr) {
    std::string supported;
    for (const NamedPreTokenizer& entry : kNamed) {
      supported += supported.empty() ? "" : ", ";
      supported += entry.name;
    }
    return unimplemented_error("pre-tokenizer '" + std::string(name) +
                               "' is not supported (supported: " + supported + ")");
  }
  return std::vector<std::string_view>(named->patterns.begin(), named->patterns.end());
}

std::optional<std::string_view> PreTokenizer::name_of_rules(const std::vector<SplitRule>& rules) {
  for (const NamedPreTokenizer& entry : kNamed) {
    if (entry.patterns.size() != rules.size()) continue;
    bool same = true;
    for (size_t i = 0; i < rules.size() && same; ++i) {
      same = !rules[i].literal && !rules[i].invert &&
             rules[i].behavior == SplitBehavior::kIsolated && rules[i].pattern == entry.patterns[i];
    }
    if (same) return entry.name;
  }
  return std::nullopt;
}

Result<PreTokenizer> PreTokenizer::create(std::string_view name) {
  TANDEM_ASSIGN_OR_RETURN(auto patterns, named_patterns(name));
  std::vector<SplitRule> rules;
  for (std::string_view pattern : patterns) rules.push_back(SplitRule{std::string(pattern)});
  auto pre = from_rules(name, std::move(rules));
  // The built-in patterns always compile; a failure here is a bug.
  if (!pre.ok()) return internal_error(pre.status().to_string());
  return pre;
}

Result<PreTokenizer> PreTokenizer::from_rules(std::string_view name, std::vector<SplitRule> rules) {
  PreTokenizer pre;
  pre.name_ = std::string(name);
  for (const SplitRule& rule : rules) {
    TANDEM_ASSIGN_OR_RETURN(auto regex, Pcre2Regex::compile(rule.pattern, rule.literal));
    pre.regexes_.push_back(std::move(regex));
  }
  pre.rules_ = std::move(rules);
  return pre;
}

Status PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  if (text.empty()) return Status();
  if (regexes_.empty()) {
    out.push_back(text);
    return Status();
  }
  // Per-call matching state keeps split() re-entrant. The JIT stack may grow to 1 MiB, far more
  // than these patterns need (they have no nested unbounded backtracking).
  pcre2_match_data* match = pcre2_match_data_create(4, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
  if (match == nullptr || context == nullptr || stack == nullptr) {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(match);
    return resource_exhausted_error("pre-tokenizer: out of memory for PCRE2 match data");
  }
  pcre2_jit_stack_assign(context, nullptr, stack);

  Status status;
  std::vector<std::string_view> current{text};
  std::vector<std::string_view> next;
  for (size_t r = 0; r < regexes_.size() && status.ok(); ++r) {
    std::vector<std::string_view>& target = r + 1 == regexes_.size() ? out : next;
    for (std::string_view piece : current) {
      status = regexes_[r]->split(piece, rules_[r], match, context, target);
      if (!status.ok()) break;
    }
    if (r + 1 < regexes_.size()) {
      current.swap(next);
      next.clear();
    }
  }
  pcre2_jit_stack_free(stack);
  pcre2_match_context_free(context);
  pcre2_match_data_free(match);
  return status;
}

}  // namespace tandem::tokenizer
