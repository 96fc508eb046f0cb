// Reading Hugging Face tokenizer.json (+ tokenizer_config.json) into the tokenizer's Vocab and
// PreTokenizer; Tokenizer::load_hf / from_hf_json are the public entry points.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/vocab.h"

namespace tandem::tokenizer {

// What a tokenizer.json describes, in the terms of this module.
struct HfTokenizerParts {
  std::unique_ptr<Vocab> vocab;
  std::unique_ptr<PreTokenizer> pre;  // null for SentencePiece-style (Metaspace) tokenizers
  bool ignore_merges = false;
};

// Supported (anything else is UNIMPLEMENTED, naming the component):
//   model       BPE: vocab, merges ("a b" strings or [a, b] pairs), unk_token, ignore_merges,
//               byte_fallback (with Metaspace), dropout null/0, no subword prefix/suffix.
//   normalizer  null; NFC, NFD, NFKC or NFKD (ICU limited to Unicode 11.0 as HF; at most one,
//               applied to each fragment between added tokens; added tokens are matched on the
//               raw text); Prepend("▁") and Replace(" " -> "▁") as Llama-style SentencePiece BPE
//               uses them; a Sequence of those (NFKC/NFKD not after Replace). Lowercase is
//               UNIMPLEMENTED: HF lowercases per character, unlike ICU's context-sensitive
//               rules (final sigma).
//   pre_tokenizer  ByteLevel (add_prefix_space only as the first step; use_regex adds GPT-2's
//               regex), Split (Regex or String pattern; Isolated, Removed, MergedWithPrevious,
//               MergedWithNext, Contiguous; invert), Sequence of those with ByteLevel last
//               (regexes run through PCRE2 as written; a sequence that is exactly a named
//               pre-tokenizer's, e.g. gpt-oss's o200k Split = "gpt-4o", gives the vocab that
//               name, else "tokenizer.json");
//               Metaspace (replacement ▁, prepend_scheme first/always/never) for BPE with
//               byte_fallback.
//   decoder     ByteLevel; for Metaspace models Metaspace or Sequence of Replace/ByteFallback/
//               Fuse/Strip.
//   post_processor  null, ByteLevel, TemplateProcessing whose single template is
//               [BOS] $A [EOS] (either special token optional).
//   added_tokens special -> control, others -> user-defined (always matched). lstrip, rstrip
//               and single_word are not applied (a warning names the token).
// tokenizer_config.json gives bos/eos/pad/unk token texts, add_bos_token/add_eos_token (used
// when the post_processor does not decide) and chat_template (a string, or the "default" entry
// of a list of {name, template}).
// INVALID_ARGUMENT for malformed JSON or inconsistent ids.
Result<HfTokenizerParts> parse_hf_tokenizer(std::string_view tokenizer_json,
                                            std::string_view config_json);

}  // namespace tandem::tokenizer
