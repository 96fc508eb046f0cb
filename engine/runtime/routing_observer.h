// RoutingObserver: what the scheduler tells a listener about each forward pass's expert routing
// and expert worker time (live activation statistics, per-request MoE counters, metrics).
#pragma once

#include <span>
#include <string>

#include "engine/experts/routing.h"

namespace tandem::runtime {

// Who owns one token row of a forward pass.
struct RoutedToken {
  const std::string* request_id = nullptr;  // valid during the call only
  bool prefill = false;                     // a prompt (or recomputed) token, not a decode token
};

// Implemented by the server; the scheduler calls it from its own thread only, so an
// implementation needs no lock for state that only these calls touch (anything other threads
// read must be synchronized by the implementation). Calls must be quick: they run inside the
// engine loop.
class RoutingObserver {
 public:
  virtual ~RoutingObserver() = default;

  // After every successful forward pass. routing[layer] has one row per token of the batch for
  // MoE layers (n_tokens == 0 for dense layers); tokens[i] says whose row i is.
  virtual void on_forward(std::span<const experts::Routing> routing,
                          std::span<const RoutedToken> tokens) = 0;
  // Right after on_forward, for the same pass: ForwardOutput::expert_seconds, i.e. per expert
  // worker index (0 = the CPU worker), the seconds its shares of the pass took, summed over the
  // MoE layers; concurrent shares each count fully. Valid during the call only.
  virtual void on_expert_seconds(std::span<const double> seconds_per_worker) {
    (void)seconds_per_worker;
  }
  // A request was admitted for the first time (it leaves the queue and starts prefill).
  virtual void on_started(const std::string& request_id) { (void)request_id; }
  // A request's final event was pushed (any finish reason).
  virtual void on_finished(const std::string& request_id) { (void)request_id; }
};

}  // namespace tandem::runtime
