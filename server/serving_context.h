// ServingContext: what the gRPC services share — the engine (once loaded), the model's facts, the
// serving state (loading / serving / draining) and the metrics.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/facade/engine.h"
#include "server/api_key_auth.h"
#include "server/generate_request_mapping.h"

namespace tandem::tokenizer {
class Tokenizer;
}  // namespace tandem::tokenizer

namespace tandem::placement {
struct StartupPlacement;
}  // namespace tandem::placement

namespace tandem::server {

class ServerMetrics;
class MoeActivity;

// The facts GetModelInfo reports. A plain value, filled once when the model is loaded.
struct ServedModelInfo {
  std::string model_path;                  // absolute
  std::string served_model_name;           // the name clients put in "model"
  std::string tokenizer_path;              // a directory the gateway can read; empty when none
  std::string model_type;                  // e.g. "qwen3_moe"
  std::vector<std::string> architectures;  // e.g. "Qwen3MoeForCausalLM"
  int64_t context_length = 0;
  int64_t vocab_size = 0;
  std::vector<int32_t> eos_token_ids;
  int32_t bos_token_id = -1;  // -1: none
  int32_t pad_token_id = -1;  // -1: none
};

enum class ServingState {
  kLoading,   // listening, model not ready: health NOT_SERVING, calls UNAVAILABLE
  kServing,   // everything answers
  kDraining,  // SIGTERM: no new requests (UNAVAILABLE), in-flight ones finish
};

// Owned by tandemd's main; outlives the gRPC server. The engine members are set once, by the main
// thread, before set_state(kServing); the services read them only after state() returned
// kServing or kDraining (acquire/release on the state makes them visible).
struct ServingContext {
  engine::Engine* served = nullptr;
  const tokenizer::Tokenizer* tokenizer = nullptr;  // may stay null (no text input then)
  ServedModelInfo model;
  GenerateMappingLimits mapping_limits;
  ServerMetrics* metrics = nullptr;                        // may be null (tests)
  MoeActivity* moe_activity = nullptr;                     // may be null (tests)
  const placement::StartupPlacement* placement = nullptr;  // may be null (tests)
  std::string
      gpu_device;       // the GPU holding expert copies, e.g. "device 0 (NVIDIA H200)"; "" = none
  CallAuthPolicy auth;  // server.api_keys and server.trusted_peers
  std::chrono::steady_clock::time_point started_at = std::chrono::steady_clock::now();
  // How long a streaming write may stay unacknowledged before the request is cancelled as a
  // stalled reader (hardening row C7).
  std::chrono::milliseconds stalled_write_timeout{30000};
  // A loop that has not finished an iteration for this long reports unhealthy (row C13). The
  // heartbeat advances between forward passes only, so this must exceed the longest step: a
  // 512-token prefill chunk of a large model on CPU cores can take minutes.
  std::chrono::milliseconds wedged_after{600000};

  std::atomic<ServingState> state{ServingState::kLoading};
  std::atomic<double> last_receive_unix_seconds{0.0};

  ServingState current_state() const { return state.load(std::memory_order_acquire); }
  void set_state(ServingState s) { state.store(s, std::memory_order_release); }
  // The engine when serving or draining, else null.
  engine::Engine* engine() const {
    return current_state() == ServingState::kLoading ? nullptr : served;
  }
};

}  // namespace tandem::server
