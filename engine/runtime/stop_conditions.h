// StopConditions: decides, token by token, when one sequence's output ends and what text to
// release.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/runtime/request.h"
#include "engine/runtime/sampling_params.h"

namespace tandem::runtime {

// What feed() decided for one token.
struct StopDecision {
  // Output text the client may see now. Never holds a partial stop string; concatenated over all
  // decisions it is the final output text.
  std::string text;
  bool finished = false;
  FinishReason reason = FinishReason::kStop;  // meaningful only when finished
  // Which stop matched (at most one is set; neither for length or abort).
  std::optional<int32_t> matched_token_id;         // EOS or one of stop_token_ids
  std::optional<std::string> matched_stop_string;  // one of SamplingParams::stop
};

// Pure state machine, no model: feed each generated token with the text the incremental
// detokenizer released for it. Checks, in this order, per token:
//   1. EOS (unless ignore_eos) or a stop token id → kStop with matched_token_id; that token's text
//      is dropped unless include_stop_str_in_output.
//   2. Stop strings on the text so far (a match may span tokens): the earliest match wins (ties:
//      the one listed first) → kStop with matched_stop_string; the text before it is released,
//      the stop string itself only with include_stop_str_in_output, anything after is dropped.
//      Without a match, the longest tail that is a proper prefix of some stop string is held
//      back until later text decides it.
//   3. max_tokens reached, or prompt + output reached the context length → kLength.
// 1 and 2 apply only from the min_tokens-th token on (text before that is released at once).
// On any finish the held-back text is released. Owned by one sequence; one thread at a time.
class StopConditions {
 public:
  // `params` must have passed validate(). `context_length` > prompt_tokens (the caller checks).
  StopConditions(const SamplingParams& params, std::vector<int32_t> eos_token_ids,
                 int64_t prompt_tokens, int64_t context_length);

  // One generated token and its text piece (may be empty). After the output finished, returns a
  // finished decision with no text and changes nothing.
  StopDecision feed(int32_t token, std::string_view piece);

  // Ends the output with kAbort (the caller cancelled), releasing the held-back text. No-op (a
  // finished decision with no text) when already finished.
  StopDecision abort();

  bool finished() const { return finished_; }
  int64_t output_tokens() const { return output_tokens_; }
  // Bytes received but not yet released (a possible start of a stop string).
  size_t held_back_bytes() const { return pending_.size(); }

 private:
  StopDecision finish(FinishReason reason, std::string text);
  size_t hold_back_length() const;

  SamplingParams params_;
  std::vector<int32_t> eos_token_ids_;
  int64_t prompt_tokens_;
  int64_t context_length_;
  int64_t output_tokens_ = 0;
  bool finished_ = false;
  FinishReason reason_ = FinishReason::kStop;
  std::string pending_;
};

}  // namespace tandem::runtime
