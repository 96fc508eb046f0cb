// Forward-pass batch types: the sequences a forward call runs and the logits it returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/check.h"
#include "engine/experts/routing.h"
#include "engine/runtime/kv_cache.h"

namespace tandem::runtime {

// Which positions of a sequence's new tokens get logits.
enum class LogitsWanted { kNone, kLast, kAll };

// One sequence's share of a batch: `tokens` at positions start_pos .. start_pos + n - 1. A prompt
// (prefill) is one entry with start_pos 0 (or a chunk of it with start_pos = cache->length());
// a decode step is one token with start_pos = cache->length(). start_pos may be below
// cache->length() to rewind (the tail is overwritten). The cache and the token span are the
// caller's and must stay valid during the forward call; a cache appears at most once per batch.
struct SequenceInput {
  KvCache* cache = nullptr;
  std::span<const int32_t> tokens;
  size_t start_pos = 0;
  LogitsWanted logits = LogitsWanted::kLast;
};

struct ForwardOptions {
  // Fill ForwardOutput::routing (copies n_tokens * k ids and weights per MoE layer).
  bool record_routing = false;
};

// The result of one forward call. Owned by the caller; reused across calls (vectors keep their
// capacity).
struct ForwardOutput {
  size_t n_vocab = 0;
  // Logits rows [rows x n_vocab], sequences in batch order, positions ascending.
  std::vector<float> logits;
  std::vector<size_t> first_row;  // per sequence: its first row in `logits`
  std::vector<size_t> n_rows;     // per sequence: 0, 1 (kLast) or its token count (kAll)
  // When ForwardOptions::record_routing: routing[layer] for every layer (n_tokens == 0 for dense
  // layers); tokens in batch order (all of sequence 0's, then sequence 1's, ...).
  std::vector<experts::Routing> routing;
  // Always, after a successful call: per expert worker (an index into the list given to
  // ModelRunner::set_expert_workers; index 0 is the runner's own CPU worker by default), the wall
  // seconds its shares of this call took, summed over the MoE layers and measured on the thread
  // that ran each share (experts::MoeLayer::worker_seconds), so shares that ran concurrently each
  // count fully. 0 for a worker that got no pairs. Empty after a failed call.
  std::vector<double> expert_seconds;

  // Row i (0-based within the sequence's rows) of sequence `seq`.
  std::span<const float> row(size_t seq, size_t i) const {
    TANDEM_CHECK(seq < first_row.size() && i < n_rows[seq]);
    return std::span<const float>(logits).subspan((first_row[seq] + i) * n_vocab, n_vocab);
  }
};

}  // namespace tandem::runtime
