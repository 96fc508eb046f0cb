// Request: one generation request as the engine sees it, and the token events its handle receives.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/runtime/logprobs.h"
#include "engine/runtime/sampling_params.h"

namespace tandem::runtime {

using TokenId = int32_t;
using Clock = std::chrono::steady_clock;

// Why a request ended. Exactly one final event per accepted request carries one of these.
enum class FinishReason {
  kStop,      // a stop condition (EOS, stop string, stop token) matched
  kLength,    // max_tokens generated
  kAbort,     // cancelled by the caller (RequestHandle::cancel or the handle dropped)
  kDeadline,  // the request's deadline passed (queued or running)
  kError,     // the engine failed this request; TokenEvent::error says why
};

// "stop", "length", "abort", "deadline", "error".
std::string_view finish_reason_name(FinishReason reason);

// Token counts reported with the final event.
struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens whose KV was reused instead of computed

  friend bool operator==(const Usage&, const Usage&) = default;
};

// Which stop condition ended a request (at most one is set; neither for length or abort).
struct StopMatch {
  std::optional<TokenId> token_id;         // EOS or one of stop_token_ids
  std::optional<std::string> stop_string;  // one of SamplingParams::stop
};

// One event on a request's stream, for one of its n samples (`index`): new tokens (is_final
// false), or that sample's single final event (is_final true; token_ids may still carry the last
// tokens). The stream ends after the final event of every sample. Value type.
struct TokenEvent {
  int64_t index = 0;  // which of the request's n samples (0 .. n - 1)
  std::vector<TokenId> token_ids;
  // One entry per token_ids entry when the request asked for logprobs, else empty.
  std::vector<TokenLogprobs> logprobs;
  // Set once (sample 0), in an event of its own before the first output token, when the request
  // asked for prompt_logprobs: one entry per prompt token after the first (the first has none; a
  // one-token prompt gives an empty list).
  std::optional<std::vector<TokenLogprobs>> prompt_logprobs;
  std::string text;  // detokenized text of token_ids when the engine produces it; may be empty
  // Prompt tokens the prefix cache served, on every token event after admission (0 before; the
  // final event's usage carries it too).
  int64_t cached_tokens = 0;
  bool is_final = false;
  FinishReason finish_reason = FinishReason::kStop;  // meaningful only when is_final
  Usage usage;                                       // meaningful only when is_final
  Status error;       // non-OK only for FinishReason::kError (and kDeadline: DEADLINE_EXCEEDED)
  StopMatch matched;  // meaningful only when is_final with kStop
};

// A request as submitted to the engine. Value type; the scheduler thread owns its copy after
// submission.
struct Request {
  std::string id;  // unique among in-flight requests (duplicate → ALREADY_EXISTS)
  std::vector<TokenId> prompt_token_ids;
  SamplingParams sampling;
  // Independent samples of the prompt (OpenAI `n`), 1 .. max_running: they share the prompt's KV
  // blocks, sample i is seeded with seed + i when a seed is given.
  int64_t n = 1;
  std::optional<Clock::time_point> deadline;  // none: no deadline
  Clock::time_point arrival_time{};           // set by RequestQueue::submit
};

}  // namespace tandem::runtime
