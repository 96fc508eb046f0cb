// SamplingParams::validate: bounds of every sampling knob, with messages that name the knob.
#include "engine/runtime/sampling_params.h"

#include "engine/runtime/logprobs.h"

#include <charconv>
#include <cmath>
#include <string_view>

namespace tandem::runtime {
namespace {

// Shortest round-trip text of a float ("nan", "inf", "-1.5").
std::string number_text(float value) {
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::string number_text(int64_t value) {
  return std::to_string(value);
}

Status bad(std::string_view name, std::string_view bound, const std::string& got) {
  return invalid_argument_error(std::string(name) + " must be " + std::string(bound) + ", got " +
                                got);
}

// True when lo <= value <= hi; false for NaN.
bool in_closed(float value, float lo, float hi) {
  return value >= lo && value <= hi;
}

Status check_token_id(std::string_view name, int64_t id, int64_t n_vocab) {
  if (id < 0 || id >= n_vocab) {
    return bad(name, "a token id in [0, " + number_text(n_vocab) + ")", number_text(id));
  }
  return Status();
}

}  // namespace

Status SamplingParams::validate(const SamplingLimits& limits) const {
  if (!std::isfinite(temperature) || temperature < 0.0f) {
    return bad("temperature", "a finite number >= 0", number_text(temperature));
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) return bad("top_p", "in (0, 1]", number_text(top_p));
  if (top_k < -1) return bad("top_k", ">= -1 (0 or -1: disabled)", number_text(top_k));
  if (!in_closed(min_p, 0.0f, 1.0f)) return bad("min_p", "in [0, 1]", number_text(min_p));
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0.0f) {
    return bad("repetition_penalty", "a finite number > 0", number_text(repetition_penalty));
  }
  if (!in_closed(presence_penalty, -kMaxAbsPenalty, kMaxAbsPenalty)) {
    return bad("presence_penalty", "in [-2, 2]", number_text(presence_penalty));
  }
  if (!in_closed(frequency_penalty, -kMaxAbsPenalty, kMaxAbsPenalty)) {
    return bad("frequency_penalty", "in [-2, 2]", number_text(frequency_penalty));
  }

  if (static_cast<int64_t>(logit_bias.size()) > limits.max_logit_bias_entries) {
    return bad("logit_bias", "at most " + number_text(limits.max_logit_bias_entries) + " entries",
               number_text(static_cast<int64_t>(logit_bias.size())) + " entries");
  }
  for (const auto& [id, bias] : logit_bias) {
    TANDEM_RETURN_IF_ERROR(check_token_id("logit_bias key", id, limits.n_vocab));
    if (!in_closed(bias, -kMaxAbsLogitBias, kMaxAbsLogitBias)) {
      return bad("logit_bias[" + number_text(int64_t{id}) + "]", "in [-100, 100]",
                 number_text(bias));
    }
  }

  if (max_tokens.has_value() && (*max_tokens < 1 || *max_tokens > limits.max_tokens_cap)) {
    return bad("max_tokens", "in [1, " + number_text(limits.max_tokens_cap) + "]",
               number_text(*max_tokens));
  }
  if (min_tokens < 0) return bad("min_tokens", ">= 0", number_text(min_tokens));
  if (max_tokens.has_value() && min_tokens > *max_tokens) {
    return bad("min_tokens", "<= max_tokens (" + number_text(*max_tokens) + ")",
               number_text(min_tokens));
  }
  if (!max_tokens.has_value() && min_tokens > limits.max_tokens_cap) {
    return bad("min_tokens", "<= " + number_text(limits.max_tokens_cap), number_text(min_tokens));
  }

  if (logprobs.has_value() && (*logprobs < 0 || *logprobs > kMaxTopLogprobs)) {
    return bad("logprobs", "in [0, " + number_text(kMaxTopLogprobs) + "]", number_text(*logprobs));
  }
  if (prompt_logprobs.has_value() && (*prompt_logprobs < 0 || *prompt_logprobs > kMaxTopLogprobs)) {
    return bad("prompt_logprobs", "in [0, " + number_text(kMaxTopLogprobs) + "]",
               number_text(*prompt_logprobs));
  }

  if (static_cast<int64_t>(stop.size()) > limits.max_stop_strings) {
    return bad("stop", "at most " + number_text(limits.max_stop_strings) + " strings",
               number_text(static_cast<int64_t>(stop.size())) + " strings");
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    const auto size = static_cast<int64_t>(stop[i].size());
    if (size == 0 || size > limits.max_stop_string_bytes) {
      return bad("stop[" + std::to_string(i) + "]",
                 "1 to " + number_text(limits.max_stop_string_bytes) + " bytes long",
                 number_text(size) + " bytes");
    }
  }
  if (static_cast<int64_t>(stop_token_ids.size()) > limits.max_stop_token_ids) {
    return bad("stop_token_ids", "at most " + number_text(limits.max_stop_token_ids) + " entries",
               number_text(static_cast<int64_t>(stop_token_ids.size())) + " entries");
  }
  for (int32_t id : stop_token_ids) {
    TANDEM_RETURN_IF_ERROR(check_token_id("stop_token_ids entry", id, limits.n_vocab));
  }
  return Status();
}

}  // namespace tandem::runtime
