// The GPU self-check at start: one short probe through the runner on the CPU alone, then again
// with the GPU attached, compared before tandemd serves, so that a GPU path computing garbage
// (a driver or kernel fault the tests never saw) refuses to start instead of serving it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/paged_kv_cache.h"

namespace tandem::engine {

// The probe: kProbeTokens fixed token ids (spread over the vocabulary) as one prefill, logits of
// every position.
inline constexpr size_t kProbeTokens = 8;

// Runs the probe through `runner` as it is configured now, as passes of at most pass_tokens tokens
// (the scheduler's runtime.prefill_chunk_tokens: a device executor's window rings take no longer
// passes; compare probes of the same pass size), and returns its logits [kProbeTokens x n_vocab].
// With a dense executor the probe's KV cache must be a paged one of the executor's pool: pass that
// pool (its first blocks are borrowed through a private allocator, so call this only before the
// scheduler has admitted anything); null = a private dense cache. Errors: the forward pass's;
// INVALID_ARGUMENT for pass_tokens 0.
Result<std::vector<float>> run_probe(runtime::ModelRunner& runner, runtime::KvPool* pool,
                                     size_t pass_tokens = kProbeTokens);

// How far `got` is from `want`: ||got - want||_2 / ||want||_2 (infinity when got holds a NaN or an
// infinity, or the sizes differ; 0 for two empty spans).
double relative_error(std::span<const float> want, std::span<const float> got);

// The largest relative_error accepted. The GPU computes in float what the CPU computes with Q8_0
// activations for Q8_0 weights (~0.4 % relative rounding per matmul input), and sums in another
// order; through a few layers that stays well under 1 %. A wrong kernel is off by order 1.
inline constexpr double kProbeTolerance = 0.05;

// OK when relative_error(cpu, gpu) <= kProbeTolerance; otherwise FAILED_PRECONDITION naming the
// error, the bound, `what` ran on the GPU, and the settings that take the GPU out of the path.
Status check_probe(std::span<const float> cpu, std::span<const float> gpu, const std::string& what);

}  // namespace tandem::engine
