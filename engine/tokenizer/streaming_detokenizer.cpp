// StreamingDetokenizer: per-token decoding that emits only complete UTF-8 characters.
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace tandem::tokenizer {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, DecodeOptions options)
    : tokenizer_(&tokenizer), options_(options) {}

Result<std::string> StreamingDetokenizer::feed(int32_t id) {
  TANDEM_ASSIGN_OR_RETURN(std::string bytes, tokenizer_->token_bytes(id, options_.skip_special));
  const TokenType type = tokenizer_->token_type(id);
  if (at_start_ && type != TokenType::kControl && type != TokenType::kUnknown) {
    if (options_.strip_space_prefix && tokenizer_->add_space_prefix() && !bytes.empty() &&
        bytes[0] == ' ') {
      bytes.erase(0, 1);
    }
    at_start_ = false;
  }
  pending_.append(bytes);
  // Emit every complete or ill-formed sequence; keep an unfinished one at the end.
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const Utf8Step step = utf8_step(std::string_view(pending_).substr(i));
    if (step.kind == Utf8Step::kIncomplete) break;
    if (step.kind == Utf8Step::kValid) {
      out.append(pending_, i, step.length);
    } else {
      out.append(kReplacementChar);
    }
    i += step.length;
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamingDetokenizer::flush() {
  std::string out = pending_.empty() ? std::string() : std::string(kReplacementChar);
  pending_.clear();
  at_start_ = true;
  return out;
}

}  // namespace tandem::tokenizer
