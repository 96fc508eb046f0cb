// run_probe / relative_error / check_probe: the start-up comparison of the GPU path with the CPU.
#include "engine/facade/gpu_self_check.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <sstream>

namespace tandem::engine {

Result<std::vector<float>> run_probe(runtime::ModelRunner& runner, runtime::KvPool* pool,
                                     size_t pass_tokens) {
  if (pass_tokens == 0) return invalid_argument_error("the probe needs passes of >= 1 token");
  std::vector<int32_t> ids(kProbeTokens);
  const size_t vocab = runner.n_vocab();
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7919 + 13) % vocab);

  std::unique_ptr<runtime::KvBlockAllocator> allocator;
  std::unique_ptr<runtime::KvCache> cache;
  if (pool == nullptr) {
    cache = runner.new_kv_cache(kProbeTokens);
  } else {
    // The probe takes the first blocks of the (not yet used) pool, wrapped as the scheduler wraps
    // its caches (a model with sliding-window layers: the pool holds the full layers only).
    TANDEM_ASSIGN_OR_RETURN(runtime::KvBlockAllocator a, runtime::make_allocator_for(*pool));
    allocator = std::make_unique<runtime::KvBlockAllocator>(std::move(a));
    cache = runner.wrap_kv_cache(
        std::make_unique<runtime::PagedKvCache>(*pool, *allocator, runtime::SeqId{1}, kProbeTokens),
        kProbeTokens);
  }
  // In passes of at most pass_tokens tokens, as the scheduler prefills (a device executor's window
  // rings are sized for its chunks).
  std::vector<float> logits;
  logits.reserve(ids.size() * vocab);
  runtime::ForwardOutput out;
  for (size_t start = 0; start < ids.size(); start += pass_tokens) {
    const size_t n = std::min(pass_tokens, ids.size() - start);
    const runtime::SequenceInput seq{cache.get(), std::span<const int32_t>(ids).subspan(start, n),
                                     start, runtime::LogitsWanted::kAll};
    TANDEM_RETURN_IF_ERROR(runner.forward({&seq, 1}, out));
    logits.insert(logits.end(), out.logits.begin(), out.logits.end());
  }
  cache.reset();  // frees its blocks before the allocator goes
  return logits;
}

double relative_error(std::span<const float> want, std::span<const float> got) {
  if (want.size() != got.size()) return std::numeric_limits<double>::infinity();
  double diff = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    const double d = static_cast<double>(got[i]) - static_cast<double>(want[i]);
    diff += d * d;
    norm += static_cast<double>(want[i]) * static_cast<double>(want[i]);
  }
  if (diff == 0.0) return 0.0;
  return norm == 0.0 ? std::numeric_limits<double>::infinity() : std::sqrt(diff / norm);
}

Status check_probe(std::span<const float> cpu, std::span<const float> gpu,
                   const std::string& what) {
  const double err = relative_error(cpu, gpu);
  if (err <= kProbeTolerance) return Status();
  std::ostringstream msg;
  msg << "GPU self-check failed: with " << what << " on the GPU the start-up probe's logits differ "
      << "from the CPU's by " << err << " (relative L2; at most " << kProbeTolerance
      << " is accepted). The GPU path computes wrong results on this machine; run "
         "scripts/gpu-check.sh and report it, and meanwhile set runtime.dense_device: cpu and/or "
         "placement.num_gpu_experts: 0";
  return failed_precondition_error(msg.str());
}

}  // namespace tandem::engine
