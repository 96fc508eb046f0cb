// CpuExpertWorker: the ExpertWorker that computes routed experts on the CPU with a ThreadPool.
#pragma once

#include <memory>
#include <vector>

#include "engine/base/result.h"
#include "engine/base/thread_pool.h"
#include "engine/experts/expert_worker.h"
#include "engine/experts/pooled_matmul.h"
#include "engine/model/model.h"

namespace tandem::experts {

// One expert's three projections as kernel views.
struct ExpertMatrices {
  kernels::WeightMatrix gate;  // [expert_ffn x hidden]
  kernels::WeightMatrix up;    // [expert_ffn x hidden]
  kernels::WeightMatrix down;  // [hidden x expert_ffn]
};

// Views (never copies) the routed-expert weights of every MoE layer. The ModelWeights (and the
// checkpoint mapping behind it) and the pool must outlive the worker. Each expert's rows are one
// matmul per projection whose W rows are split over the pool. Q8_0 weights use `mode` (the
// engine passes kQ8_0, llama.cpp's CPU arithmetic); other types compute in float.
// run() is called by one thread at a time (the forward pass's, or a MoeLayer helper thread);
// while it runs, nobody else may call parallel_for on the same pool (MoeLayer guarantees this
// through thread_pool()).
class CpuExpertWorker final : public ExpertWorker {
 public:
  // INVALID_ARGUMENT / UNIMPLEMENTED when an expert matrix has a type or size the kernels refuse.
  static Result<std::unique_ptr<CpuExpertWorker>> create(const model::ModelSpec& spec,
                                                         const model::ModelWeights& weights,
                                                         ThreadPool* pool,
                                                         kernels::MatmulActivations mode);

  std::string_view name() const override { return "cpu"; }
  Status run(const ExpertJob& job) override;
  const ThreadPool* thread_pool() const override { return pool_; }

 private:
  CpuExpertWorker() = default;

  std::vector<std::vector<ExpertMatrices>> layers_;  // empty for dense layers
  ThreadPool* pool_ = nullptr;
  kernels::MatmulActivations mode_ = kernels::MatmulActivations::kFloat;
  MatmulScratch scratch_;
  std::vector<float> gathered_;
  std::vector<float> expert_out_;
};

// A kernel view of one model matrix (2-D [rows, cols], or 1-D [cols] as one row).
Result<kernels::WeightMatrix> weight_matrix_of(const model::TensorInfo& tensor);
Result<kernels::WeightMatrix> weight_matrix_of(const model::MatrixView& view);

}  // namespace tandem::experts
