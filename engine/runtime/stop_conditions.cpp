// StopConditions: EOS / stop ids, stop strings with hold-back, max_tokens and the context limit.
#include "engine/runtime/stop_conditions.h"

#include <algorithm>
#include <utility>

namespace tandem::runtime {

StopConditions::StopConditions(const SamplingParams& params, std::vector<int32_t> eos_token_ids,
                               int64_t prompt_tokens, int64_t context_length)
    : params_(params),
      eos_token_ids_(std::move(eos_token_ids)),
      prompt_tokens_(prompt_tokens),
      context_length_(context_length) {}

StopDecision StopConditions::finish(FinishReason reason, std::string text) {
  finished_ = true;
  reason_ = reason;
  pending_.clear();
  StopDecision decision;
  decision.text = std::move(text);
  decision.finished = true;
  decision.reason = reason;
  return decision;
}

size_t StopConditions::hold_back_length() const {
  const std::string_view text(pending_);
  size_t hold = 0;
  for (const std::string& stop : params_.stop) {
    const size_t longest = std::min(text.size(), stop.size() - 1);
    for (size_t length = longest; length > hold; --length) {
      if (text.ends_with(std::string_view(stop).substr(0, length))) {
        hold = length;
        break;
      }
    }
  }
  return hold;
}

StopDecision StopConditions::feed(int32_t token, std::string_view piece) {
  if (finished_) {
    StopDecision decision;
    decision.finished = true;
    decision.reason = reason_;
    return decision;
  }
  ++output_tokens_;
  const bool may_stop = output_tokens_ >= params_.min_tokens;

  if (may_stop) {
    const bool is_eos =
        !params_.ignore_eos &&
        std::find(eos_token_ids_.begin(), eos_token_ids_.end(), token) != eos_token_ids_.end();
    const bool is_stop_id = std::find(params_.stop_token_ids.begin(), params_.stop_token_ids.end(),
                                      token) != params_.stop_token_ids.end();
    if (is_eos || is_stop_id) {
      std::string text = std::move(pending_);
      if (params_.include_stop_str_in_output) text.append(piece);
      StopDecision decision = finish(FinishReason::kStop, std::move(text));
      decision.matched_token_id = token;
      return decision;
    }
  }

  pending_.append(piece);
  StopDecision decision;
  if (may_stop && !params_.stop.empty()) {
    size_t best_pos = std::string::npos;
    const std::string* best_stop = nullptr;
    for (const std::string& stop : params_.stop) {
      const size_t pos = pending_.find(stop);
      if (pos < best_pos) {
        best_pos = pos;
        best_stop = &stop;
      }
    }
    if (best_stop != nullptr) {
      std::string text = pending_.substr(0, best_pos);
      if (params_.include_stop_str_in_output) text += *best_stop;
      std::string matched = *best_stop;
      decision = finish(FinishReason::kStop, std::move(text));
      decision.matched_stop_string = std::move(matched);
      return decision;
    }
    const size_t release = pending_.size() - hold_back_length();
    decision.text = pending_.substr(0, release);
    pending_.erase(0, release);
  } else {
    decision.text = std::move(pending_);
    pending_.clear();
  }

  const bool max_reached = params_.max_tokens.has_value() && output_tokens_ >= *params_.max_tokens;
  const bool context_full = prompt_tokens_ + output_tokens_ >= context_length_;
  if (max_reached || context_full) {
    std::string text = std::move(decision.text);
    text += pending_;
    return finish(FinishReason::kLength, std::move(text));
  }
  return decision;
}

StopDecision StopConditions::abort() {
  if (finished_) {
    StopDecision decision;
    decision.finished = true;
    decision.reason = reason_;
    return decision;
  }
  return finish(FinishReason::kAbort, std::move(pending_));
}

}  // namespace tandem::runtime
