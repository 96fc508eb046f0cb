// GpuDense: a one-sequence paged KV pool and a CUDA dense executor for `tandem bench`.
#include "cli/bench_gpu_dense.h"

#include <string>

#include "engine/runtime/model_runner.h"

#if defined(TANDEM_WITH_CUDA)
#include "engine/runtime/cuda_dense_executor.h"
#endif

namespace tandem::cli {

GpuDense::~GpuDense() {
  if (runner_ != nullptr) (void)runner_->set_dense_executor(nullptr);
  cache_.reset();  // frees its blocks in the allocator, which goes next
}

Status GpuDense::attach(ModelSession& session, bool enabled, size_t positions,
                        size_t max_batch_tokens) {
  if (!enabled) return Status();
#if defined(TANDEM_WITH_CUDA)
  runtime::ModelRunner& runner = *session.runner;
  const model::ModelSpec& spec = *session.checkpoint.spec;
  constexpr size_t kBlockTokens = 16;
  const size_t blocks = (positions + kBlockTokens - 1) / kBlockTokens;
  TANDEM_ASSIGN_OR_RETURN(
      pool_, runtime::KvPool::create(spec.n_layers, spec.kv_dim(), kBlockTokens, blocks));
  TANDEM_ASSIGN_OR_RETURN(runtime::KvBlockAllocator allocator, runtime::make_allocator_for(*pool_));
  allocator_ = std::make_unique<runtime::KvBlockAllocator>(std::move(allocator));
  runtime::CudaDenseOptions options;
  options.device = 0;
  options.max_batch_tokens = max_batch_tokens;
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<runtime::CudaDenseExecutor> executor,
      runtime::CudaDenseExecutor::create(spec, *session.checkpoint.weights, *pool_, options));
  device_bytes_ = executor->info().bytes.total();
  TANDEM_RETURN_IF_ERROR(runner.set_dense_executor(std::move(executor)));
  runner_ = &runner;
  cache_ =
      std::make_unique<runtime::PagedKvCache>(*pool_, *allocator_, runtime::SeqId{1}, positions);
  return Status();
#else
  (void)session;
  (void)positions;
  (void)max_batch_tokens;
  return unimplemented_error(
      "--dense-gpu: this tandem was built without CUDA (configure with -DTANDEM_CUDA=ON on a "
      "machine with nvcc)");
#endif
}

}  // namespace tandem::cli
