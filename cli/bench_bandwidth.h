// The machine's memory read bandwidth as `tandem bench` measures it, and the weight bytes a decode
// step reads: the two numbers behind its "% of the bandwidth limit" figure.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "cli/model_session.h"

namespace tandem::cli {

// Best of `repeats` passes reading a freshly touched `bytes`-byte buffer with every thread of the
// pool (each thread sums its own contiguous slices), in bytes per second. Allocates and frees the
// buffer; called from the pool's owner thread.
double measure_read_bandwidth(ThreadPool& pool, uint64_t bytes, int repeats);

// Weight bytes one decoded token reads: every dense tensor (attention, norms, routers, shared
// experts, dense FFNs), the lm head, and k routed experts per MoE layer at their stored sizes (the
// token-embedding row is negligible and not counted).
uint64_t decode_weight_bytes(const ModelSession& session);

}  // namespace tandem::cli
