// GenerateReactor: one VllmEngine.Generate call, from the wire request to the last `complete`,
// driven by the engine's token events (no thread per stream).
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include "engine/runtime/request_queue.h"
#include "server/serving_context.h"
#include "vllm/grpc/engine/vllm_engine.pb.h"

namespace tandem::server {

// Lifetime: created by the service's Generate handler, deletes itself in OnDone. The engine
// pushes events on its own thread; the request handle's listener then writes what is ready.
// At most one write is in flight: events that arrive meanwhile are merged into the next chunk,
// so a slow reader costs at most its own sequence's token ids (hardening row C7), and a write
// that stays unacknowledged for stalled_write_timeout cancels the request.
//
// The request arrives raw: the API key is checked first (UNAUTHENTICATED), then it is parsed
// (INVALID_ARGUMENT naming what does not parse, see wire_message.h), then mapped and submitted.
// Streaming: one chunk per batch of new ids (cumulative completion_tokens), then one complete
// carrying all output ids, then OK. Non-streaming: one complete with all ids. Finish reasons
// stop / length / abort end with a complete; a passed deadline ends with DEADLINE_EXCEEDED, an
// engine error with its status; a cancelled call (client gone) cancels the request at once and
// ends with CANCELLED.
class GenerateReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // `request`: the GenerateRequest's bytes, read only during construction.
  GenerateReactor(ServingContext& context, grpc::CallbackServerContext* call,
                  const grpc::ByteBuffer& request);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void start(const grpc::ByteBuffer& raw);
  // Collects ready events and starts the next write or finishes. Requires mu_.
  void pump_locked();
  void finish_locked(const grpc::Status& status, std::string_view outcome);
  void write_locked();
  // Tokens generated so far over every sample. Requires mu_.
  int64_t generated_tokens() const;

  ServingContext& context_;
  grpc::CallbackServerContext* call_;
  const std::chrono::steady_clock::time_point received_at_;

  std::mutex mu_;
  runtime::RequestHandle handle_;                          // guarded by mu_ (after start)
  bool streaming_ = false;                                 // set in start, then read-only
  bool writing_ = false;                                   // guarded by mu_
  bool finished_ = false;                                  // guarded by mu_: Finish called
  std::chrono::steady_clock::time_point write_started_{};  // guarded by mu_
  std::optional<std::chrono::steady_clock::time_point> last_token_at_;  // guarded by mu_
  // One of the request's n samples: what it produced and what is still to be written.
  struct SampleStream {
    std::vector<int32_t> output_ids;                      // all ids so far
    std::vector<int32_t> unsent_ids;                      // streaming, not yet written
    std::vector<runtime::TokenLogprobs> output_logprobs;  // when asked for
    std::vector<runtime::TokenLogprobs> unsent_logprobs;
    std::optional<runtime::TokenEvent> final;
    bool complete_written = false;
  };
  std::vector<SampleStream> samples_;  // guarded by mu_: n entries, set in start
  std::vector<int32_t> prompt_ids_;    // set in start when prompt_logprobs were asked for
  std::vector<runtime::TokenLogprobs> prompt_logprobs_;  // guarded by mu_
  bool prompt_logprobs_ready_ = false;                   // guarded by mu_: the event arrived
  bool prompt_logprobs_written_ = false;                 // guarded by mu_
  int64_t prompt_tokens_ = 0;
  int64_t cached_tokens_ = 0;  // from the latest event (TokenEvent::cached_tokens)
  std::string request_id_;     // set in start once known, for the log line
  vllm::grpc::engine::GenerateResponse response_;  // the next write
  grpc::ByteBuffer response_bytes_;                // the write in flight (response_ serialized)
};

}  // namespace tandem::server
