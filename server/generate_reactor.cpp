// GenerateReactor: wire request -> engine submission -> token events -> chunks and complete.
#include "server/generate_reactor.h"

#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "server/api_key_auth.h"
#include "server/metrics.h"
#include "server/status_mapping.h"
#include "server/wire_message.h"

namespace tandem::server {
namespace {

using SteadyClock = std::chrono::steady_clock;

double seconds_between(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The call's deadline on the engine's clock; none when the client set none (gRPC reports an
// infinite deadline as a time point centuries away).
std::optional<runtime::Clock::time_point> engine_deadline(const grpc::CallbackServerContext& call) {
  const auto deadline = call.deadline();
  const auto now = std::chrono::system_clock::now();
  if (deadline >= now + std::chrono::hours(24 * 365)) return std::nullopt;
  const auto remaining = std::chrono::duration_cast<runtime::Clock::duration>(deadline - now);
  return runtime::Clock::now() + remaining;
}

// The metrics outcome label of a rejected submission.
const char* outcome_of(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "invalid_argument";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "resource_exhausted";
    case grpc::StatusCode::UNAVAILABLE:
      return "unavailable";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "already_exists";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "unauthenticated";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "deadline";
    default:
      return "error";
  }
}

// Client-influenced text (a request id, an error message that names a field) as it may go into
// a log line: printable ASCII only (a client could send control characters or a fake second
// line), at most `limit` bytes; "-" for none.
std::string loggable(std::string_view text, size_t limit) {
  if (text.empty()) return "-";
  std::string out;
  for (const char c : text.substr(0, limit)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > limit) out += "...";
  return out;
}

}  // namespace

GenerateReactor::GenerateReactor(ServingContext& context, grpc::CallbackServerContext* call,
                                 const grpc::ByteBuffer& request)
    : context_(context), call_(call), received_at_(SteadyClock::now()) {
  start(request);
}

void GenerateReactor::start(const grpc::ByteBuffer& raw) {
  std::unique_lock<std::mutex> lock(mu_);
  const grpc::Status auth = check_api_key(context_.auth, *call_);
  if (!auth.ok()) return finish_locked(auth, "unauthenticated");
  vllm::grpc::engine::GenerateRequest request;
  const grpc::Status parsed = parse_wire_message(raw, request);
  if (!parsed.ok()) return finish_locked(parsed, "invalid_argument");
  request_id_ = request.request_id();
  engine::Engine* engine = context_.engine();
  if (engine == nullptr) {
    return finish_locked(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                      "the model is still loading; retry when HealthCheck passes"),
                         "unavailable");
  }
  if (context_.current_state() == ServingState::kDraining) {
    return finish_locked(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                      "the server is shutting down and accepts no new requests"),
                         "unavailable");
  }
  Result<runtime::Request> mapped =
      to_engine_request(request, context_.mapping_limits, context_.tokenizer);
  if (!mapped.ok()) return finish_locked(to_grpc_status(mapped.status()), "invalid_argument");
  request_id_ = mapped->id;
  mapped->deadline = engine_deadline(*call_);
  streaming_ = request.stream();
  prompt_tokens_ = static_cast<int64_t>(mapped->prompt_token_ids.size());
  samples_.resize(static_cast<size_t>(std::max<int64_t>(mapped->n, 1)));
  if (mapped->sampling.prompt_logprobs.has_value()) prompt_ids_ = mapped->prompt_token_ids;
  Result<runtime::RequestHandle> handle = engine->submit(std::move(mapped).value());
  if (!handle.ok()) {
    const grpc::Status status = to_grpc_status(handle.status());
    return finish_locked(status, outcome_of(status.error_code()));
  }
  handle_ = std::move(handle).value();
  lock.unlock();
  // Lock order: the handle's listener lock, then mu_ (never the other way round).
  handle_.set_listener([this] {
    std::lock_guard<std::mutex> guard(mu_);
    pump_locked();
  });
  lock.lock();
  pump_locked();
}

void GenerateReactor::pump_locked() {
  if (finished_) return;
  // Take everything ready, even while a write is in flight: the engine's memory for this
  // request stays bounded by its own ids, and token timing is measured when it arrives.
  while (!handle_.done()) {
    std::optional<runtime::TokenEvent> event = handle_.try_next();
    if (!event.has_value()) break;
    if (event->prompt_logprobs.has_value()) {
      prompt_logprobs_ = std::move(*event->prompt_logprobs);
      prompt_logprobs_ready_ = true;
    }
    cached_tokens_ = event->cached_tokens;
    SampleStream& sample = samples_.at(static_cast<size_t>(event->index));
    if (!event->token_ids.empty()) {
      const auto now = SteadyClock::now();
      if (context_.metrics != nullptr) {
        if (!last_token_at_.has_value()) {
          context_.metrics->observe_time_to_first_token(seconds_between(received_at_, now));
        } else if (samples_.size() == 1) {
          context_.metrics->observe_inter_token_latency(seconds_between(*last_token_at_, now));
        }
      }
      last_token_at_ = now;
      sample.output_ids.insert(sample.output_ids.end(), event->token_ids.begin(),
                               event->token_ids.end());
      sample.output_logprobs.insert(sample.output_logprobs.end(), event->logprobs.begin(),
                                    event->logprobs.end());
      if (streaming_) {
        sample.unsent_ids.insert(sample.unsent_ids.end(), event->token_ids.begin(),
                                 event->token_ids.end());
        sample.unsent_logprobs.insert(sample.unsent_logprobs.end(), event->logprobs.begin(),
                                      event->logprobs.end());
      }
    }
    if (event->is_final) sample.final = std::move(event);
  }
  if (writing_) {
    if (SteadyClock::now() - write_started_ > context_.stalled_write_timeout) {
      spdlog::warn("request {}: the client has not read for {} ms; cancelling it", handle_.id(),
                   context_.stalled_write_timeout.count());
      handle_.cancel();
      finish_locked(grpc::Status(grpc::StatusCode::CANCELLED, "stalled reader"), "abort");
    }
    return;
  }
  // Chunks first, sample by sample, so that every complete follows its sample's last chunk.
  for (size_t index = 0; index < samples_.size(); ++index) {
    SampleStream& sample = samples_[index];
    if (sample.unsent_ids.empty()) continue;
    response_ = chunk_response(sample.unsent_ids, prompt_tokens_,
                               static_cast<int64_t>(sample.output_ids.size()), cached_tokens_,
                               sample.unsent_logprobs, static_cast<int64_t>(index));
    if (prompt_logprobs_ready_ && !prompt_logprobs_written_) {  // the first chunk carries them
      fill_input_logprobs(prompt_ids_, prompt_logprobs_,
                          *response_.mutable_chunk()->mutable_input_logprobs());
      prompt_logprobs_written_ = true;
    }
    sample.unsent_ids.clear();
    sample.unsent_logprobs.clear();
    return write_locked();
  }
  // An error or a passed deadline in any sample ends the call (and the other samples).
  for (const SampleStream& sample : samples_) {
    if (!sample.final.has_value()) continue;
    if (sample.final->finish_reason == runtime::FinishReason::kDeadline) {
      handle_.cancel();
      return finish_locked(
          grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "the request's deadline passed"),
          "deadline");
    }
    if (sample.final->finish_reason == runtime::FinishReason::kError) {
      handle_.cancel();
      grpc::Status status = to_grpc_status(sample.final->error);
      if (status.ok()) status = grpc::Status(grpc::StatusCode::INTERNAL, "engine error");
      spdlog::error("request {} failed in the engine: {}", handle_.id(), status.error_message());
      return finish_locked(status, "error");
    }
  }
  // One complete per finished sample (stop, length, abort), in index order as they end.
  for (size_t index = 0; index < samples_.size(); ++index) {
    SampleStream& sample = samples_[index];
    if (!sample.final.has_value() || sample.complete_written) continue;
    // A stream's chunks carried the logprobs already; SMG would count them twice.
    response_ = complete_response(
        *sample.final, sample.output_ids,
        streaming_ ? std::span<const runtime::TokenLogprobs>()
                   : std::span<const runtime::TokenLogprobs>(sample.output_logprobs),
        static_cast<int64_t>(index));
    if (prompt_logprobs_ready_ && !prompt_logprobs_written_) {
      fill_input_logprobs(prompt_ids_, prompt_logprobs_,
                          *response_.mutable_complete()->mutable_input_logprobs());
      prompt_logprobs_written_ = true;
    }
    sample.complete_written = true;
    return write_locked();
  }
  for (const SampleStream& sample : samples_) {
    if (!sample.complete_written) return;  // more to come
  }
  if (context_.metrics != nullptr) {
    context_.metrics->add_prompt_tokens(prompt_tokens_);
    context_.metrics->add_generated_tokens(generated_tokens());
  }
  finish_locked(grpc::Status::OK, runtime::finish_reason_name(samples_[0].final->finish_reason));
}

int64_t GenerateReactor::generated_tokens() const {
  int64_t total = 0;
  for (const SampleStream& sample : samples_) {
    total += static_cast<int64_t>(sample.output_ids.size());
  }
  return total;
}

void GenerateReactor::write_locked() {
  // Not StartWriteLast: a last-message write is held back until Finish, and Finish waits here
  // for OnWriteDone.
  const grpc::Status serialized = serialize_wire_message(response_, &response_bytes_);
  if (!serialized.ok()) {
    if (handle_.valid()) handle_.cancel();
    return finish_locked(serialized, "error");
  }
  writing_ = true;
  write_started_ = SteadyClock::now();
  StartWrite(&response_bytes_);
}

void GenerateReactor::finish_locked(const grpc::Status& status, std::string_view outcome) {
  if (finished_) return;
  finished_ = true;
  const double seconds = seconds_between(received_at_, SteadyClock::now());
  if (context_.metrics != nullptr) {
    context_.metrics->request_finished(outcome);
    context_.metrics->observe_request_duration(seconds);
  }
  // The one line per request at info (docs/style.md); the message never echoes request text.
  const std::string id = loggable(request_id_, 64);
  if (status.ok()) {
    spdlog::info("request {}: {}, {} prompt ({} cached) + {} generated tokens, {:.3f} s", id,
                 outcome, prompt_tokens_, cached_tokens_, generated_tokens(), seconds);
  } else {
    spdlog::info("request {}: {}, {} prompt ({} cached) + {} generated tokens, {:.3f} s; {}: {}",
                 id, outcome, prompt_tokens_, cached_tokens_, generated_tokens(), seconds,
                 status_code_name(static_cast<StatusCode>(status.error_code())),
                 loggable(status.error_message(), 200));
  }
  Finish(status);
}

void GenerateReactor::OnWriteDone(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  writing_ = false;
  if (!ok) {
    // The stream broke (client gone or call cancelled): stop generating for it.
    if (handle_.valid()) handle_.cancel();
    return finish_locked(grpc::Status(grpc::StatusCode::CANCELLED, "the stream was closed"),
                         "abort");
  }
  pump_locked();
}

void GenerateReactor::OnCancel() {
  std::lock_guard<std::mutex> lock(mu_);
  // The client went away or its deadline passed: the request leaves the batch at the next step.
  if (handle_.valid()) handle_.cancel();
  finish_locked(grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"), "abort");
}

void GenerateReactor::OnDone() {
  // No gRPC callback follows OnDone; after the listener is removed no engine callback runs
  // either, so the reactor can go. Dropping the handle cancels a request still in flight.
  if (handle_.valid()) handle_.set_listener({});
  delete this;
}

}  // namespace tandem::server
