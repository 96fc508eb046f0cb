// `tandem tokenize` / `tandem detokenize`: the testable cores (arguments in, text out, exit code).
#pragma once

#include <ostream>
#include <span>
#include <string>

namespace tandem::cli {

// `tandem tokenize` with `args` (after "tokenize"): prints the ids of the text on `out`, one line,
// space separated. --model is a GGUF file or a Hugging Face directory with tokenizer.json.
// Returns 0, 1 when encoding fails, 2 for a usage error or an unreadable tokenizer.
int tokenize_main(std::span<const std::string> args, std::ostream& out, std::ostream& err);

// `tandem detokenize` with `args` (after "detokenize"): prints the text of the ids and a newline.
// Returns 0, or 2 for a usage error, an unreadable tokenizer or an id outside the vocabulary.
int detokenize_main(std::span<const std::string> args, std::ostream& out, std::ostream& err);

}  // namespace tandem::cli
