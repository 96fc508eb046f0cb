// `tandem bench --concurrency`: N sequences decoding together through the engine Scheduler (the
// serving path), for one or more N; the testable core and its row type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "engine/runtime/pass_timings.h"

namespace tandem::runtime {
class ModelRunner;
}  // namespace tandem::runtime

namespace tandem::cli {

// The figures of one concurrency level. Times are wall-clock seconds on the scheduler thread:
// prefill_s from start() to the end of the first forward pass (which prefills every prompt and
// samples each sequence's first token), decode_s from there to the end of the last pass.
struct ConcurrencyRow {
  int concurrency = 0;
  size_t threads = 0;             // the runner's forward threads
  int64_t prompt_tokens = 0;      // all sequences together
  int64_t completion_tokens = 0;  // all sequences together (usage of the final events)
  int64_t decode_tokens = 0;      // tokens sampled after the first pass
  int64_t steps = 0;              // forward passes the scheduler ran
  double prefill_s = 0;
  double decode_s = 0;
  double decode_tokens_per_s = 0;  // aggregate over all sequences
  double per_sequence_tokens_per_s = 0;
  // CPU seconds of the whole process over the decode passes, and decode tokens per CPU-second:
  // on a shared machine these move less with the load than wall-clock figures.
  double decode_cpu_s = 0;
  double decode_tokens_per_cpu_s = 0;
  bool single_prefill_step = false;  // the first pass held every prompt (steps == gen tokens)
  // With --profile: the parts of the first pass, and of every later one.
  runtime::PassTimings prefill_parts;
  runtime::PassTimings decode_parts;
};

// "1,4,16" (or "1 4 16") -> {1, 4, 16}. INVALID_ARGUMENT for anything else, zero, or more than
// 1024 per entry.
Result<std::vector<int>> parse_concurrency_list(const std::string& text);

// Runs `tandem bench` in concurrency mode with `args` (the arguments after "bench", which must
// include --concurrency): --model M --concurrency LIST [--prompt-tokens N (default 32)]
// [--gen-tokens N (default 32, >= 2)] [--threads T] [--json] [--profile]. For each N: a fresh
// engine (session_engine_options, context and KV pool sized for N sequences); N greedy requests
// (distinct synthetic prompts, ignore_eos, max_tokens = gen tokens) submitted before the loop
// starts; figures from the scheduler's per-step timestamps; with --profile, the time of each part
// of the passes (runtime::PassTimings), first pass and the rest apart. Prints a table (or one JSON
// object with --json) to `out`, diagnostics to `err`. Returns 0, 2 for usage / model errors, 1 when
// a request fails. Main thread only.
int bench_concurrency_main(std::span<const std::string> args, std::ostream& out, std::ostream& err);

}  // namespace tandem::cli
