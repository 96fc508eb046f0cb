// CpuExpertWorker: gather -> gate/up -> silu_mul -> down -> write rows, per active expert.
#include "engine/experts/cpu_expert_worker.h"

#include <algorithm>

#include "engine/base/check.h"

namespace tandem::experts {

Result<kernels::WeightMatrix> weight_matrix_of(const model::TensorInfo& tensor) {
  uint64_t rows = 0;
  uint64_t cols = 0;
  if (tensor.shape.size() == 2) {
    rows = tensor.shape[0];
    cols = tensor.shape[1];
  } else if (tensor.shape.size() == 1) {
    rows = 1;
    cols = tensor.shape[0];
  } else {
    return invalid_argument_error("tensor " + tensor.name + " is not a matrix");
  }
  auto m = kernels::make_weight_matrix(tensor.type, tensor.data, rows, cols);
  if (!m.ok()) return m.status().with_prefix(tensor.name);
  return m;
}

Result<kernels::WeightMatrix> weight_matrix_of(const model::MatrixView& view) {
  auto m = kernels::make_weight_matrix(view.type, view.data, view.rows, view.cols);
  if (!m.ok() && view.source != nullptr) return m.status().with_prefix(view.source->name);
  return m;
}

Result<std::unique_ptr<CpuExpertWorker>> CpuExpertWorker::create(const model::ModelSpec& spec,
                                                                 const model::ModelWeights& weights,
                                                                 ThreadPool* pool,
                                                                 kernels::MatmulActivations mode) {
  std::unique_ptr<CpuExpertWorker> worker(new CpuExpertWorker());
  worker->pool_ = pool;
  worker->mode_ = mode;
  worker->layers_.resize(weights.layers.size());
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    const model::LayerWeights& lw = weights.layers[l];
    if (!lw.moe) continue;
    auto& experts = worker->layers_[l];
    experts.resize(spec.n_experts);
    for (size_t e = 0; e < spec.n_experts; ++e) {
      TANDEM_ASSIGN_OR_RETURN(experts[e].gate, weight_matrix_of(lw.experts_gate.expert(e)));
      TANDEM_ASSIGN_OR_RETURN(experts[e].up, weight_matrix_of(lw.experts_up.expert(e)));
      TANDEM_ASSIGN_OR_RETURN(experts[e].down, weight_matrix_of(lw.experts_down.expert(e)));
    }
  }
  return worker;
}

Status CpuExpertWorker::run(const ExpertJob& job) {
  TANDEM_CHECK(job.layer < layers_.size() && job.groups != nullptr);
  const auto& experts = layers_[job.layer];
  const ExpertGroups& g = *job.groups;
  const size_t hidden = job.hidden;
  for (size_t i = 0; i < g.expert_ids.size(); ++i) {
    const size_t e = static_cast<size_t>(g.expert_ids[i]);
    TANDEM_CHECK(e < experts.size());
    const ExpertMatrices& m = experts[e];
    TANDEM_CHECK(m.gate.cols == hidden && m.down.rows == hidden);
    const size_t begin = g.offsets[i];
    const size_t n = g.offsets[i + 1] - begin;
    if (gathered_.size() < n * hidden) gathered_.resize(n * hidden);
    if (expert_out_.size() < n * hidden) expert_out_.resize(n * hidden);
    for (size_t j = 0; j < n; ++j) {
      const size_t token = g.pairs[begin + j] / job.k;
      std::copy_n(job.input.data() + token * hidden, hidden, gathered_.data() + j * hidden);
    }
    std::span<float> out(expert_out_.data(), n * hidden);
    swiglu_mlp(pool_, m.gate, m.up, m.down, std::span<const float>(gathered_.data(), n * hidden), n,
               out, mode_, scratch_);
    for (size_t j = 0; j < n; ++j) {
      const size_t pair = g.pairs[begin + j];
      std::copy_n(out.data() + j * hidden, hidden, job.pair_out.data() + pair * hidden);
    }
  }
  return Status();
}

}  // namespace tandem::experts
