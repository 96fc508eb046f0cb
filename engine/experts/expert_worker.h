// ExpertWorker: the interface of a device that computes routed experts (CPU now, CUDA later).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "base/status.h"
#include "engine/experts/routing.h"

namespace tandem {
class ThreadPool;
}  // namespace tandem

namespace tandem::experts {

// One layer's share of token-expert pairs for one worker. All spans are owned by the caller
// (MoeLayer) and stay valid for the duration of run().
struct ExpertJob {
  size_t layer = 0;
  std::span<const float> input;  // [n_tokens x hidden]: the FFN-normed hidden states
  size_t n_tokens = 0;
  size_t hidden = 0;
  size_t k = 0;                          // pair p belongs to token p / k
  const ExpertGroups* groups = nullptr;  // this worker's experts and their pairs
  // [n_tokens * k x hidden]: the worker writes row p = down(act(gate x_t + b_g, up x_t + b_u)) +
  // b_d (the model's ExpertActivation; biases only where the model has them; not yet
  // scaled by the routing weight) for each of its pairs p and touches no other row.
  std::span<float> pair_out;
};

// A worker owns (or views) the expert weights it serves. run() is called by the MoE executor
// (MoeLayer), one call at a time per worker but possibly from a different thread than the
// forward pass's (a helper thread of the MoeLayer) and concurrently with OTHER workers' run(); it
// must read each active expert's weights once for all of its pairs (batched over the expert's
// tokens, never one pass per pair), and its result for a pair must not depend on which other
// pairs or workers share the job (so splitting the pairs across workers changes nothing). Errors
// (e.g. a device failure) come back as Status.
class ExpertWorker {
 public:
  virtual ~ExpertWorker() = default;
  virtual std::string_view name() const = 0;
  virtual Status run(const ExpertJob& job) = 0;
  // The ThreadPool run() drives with parallel_for, or null when it uses none. MoeLayer never runs
  // two workers that report the same pool at the same time (ThreadPool::parallel_for is
  // single-caller), so a worker that uses a pool must report it here.
  virtual const ThreadPool* thread_pool() const { return nullptr; }
};

}  // namespace tandem::experts
