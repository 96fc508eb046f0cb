// `tandem bench --dense-gpu`: the benchmarked model's dense parts (attention, norms, routers,
// shared experts, head) and its KV cache on a CUDA device, as tandemd runs them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "cli/model_session.h"
#include "engine/base/result.h"
#include "engine/runtime/kv_block_allocator.h"
#include "engine/runtime/kv_cache.h"
#include "engine/runtime/paged_kv_cache.h"

namespace tandem::cli {

// A paged KV pool sized for one sequence of `positions` positions, that sequence's cache, and
// (installed on the session's runner) a CUDA dense executor mirroring the pool. The destructor
// uninstalls the executor before the pool goes. Owned by the bench run, which must use `cache`
// for its sequence (the executor takes only caches of its pool).
class GpuDense {
 public:
  GpuDense() = default;
  GpuDense(const GpuDense&) = delete;
  GpuDense& operator=(const GpuDense&) = delete;
  ~GpuDense();

  bool attached() const { return runner_ != nullptr; }
  runtime::KvCache* cache() { return cache_.get(); }
  uint64_t device_bytes() const { return device_bytes_; }

  // enabled false: nothing (the runner stays on the CPU). Otherwise CUDA device 0 with scratch
  // for max_batch_tokens tokens. Errors: the executor's (no device, memory, weight types),
  // UNIMPLEMENTED in a build without CUDA. Same thread as the session's forward passes.
  Status attach(ModelSession& session, bool enabled, size_t positions, size_t max_batch_tokens);

 private:
  runtime::ModelRunner* runner_ = nullptr;
  std::unique_ptr<runtime::KvPool> pool_;
  std::unique_ptr<runtime::KvBlockAllocator> allocator_;
  std::unique_ptr<runtime::KvCache> cache_;
  uint64_t device_bytes_ = 0;
};

}  // namespace tandem::cli
