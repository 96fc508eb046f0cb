// pooled_matmul / swiglu_mlp: row-split matmuls over a ThreadPool.
#include "engine/experts/pooled_matmul.h"

#include "base/check.h"
#include "kernels/cpu/vector_ops.h"

namespace tandem::experts {

void pooled_matmul(ThreadPool* pool, const kernels::WeightMatrix& w, std::span<const float> x,
                   size_t n_tokens, std::span<float> y, kernels::MatmulActivations mode,
                   MatmulScratch& scratch) {
  TANDEM_CHECK(x.size() == n_tokens * w.cols);
  TANDEM_CHECK(y.size() == n_tokens * w.rows);
  if (n_tokens == 0) return;
  const kernels::ActivationFormat format = kernels::matmul_activation_format(w.type, mode);
  kernels::ActivationRows xv;
  if (format == kernels::ActivationFormat::kF32) {
    xv = kernels::ActivationRows{format, n_tokens, w.cols, x.data()};
  } else {
    kernels::quantize_activations(format, x, n_tokens, w.cols, scratch.xq);
    xv = kernels::view_of(scratch.xq);
  }
  auto rows = [&](size_t r0, size_t r1) {
    kernels::matmul_rows(w, xv, y.data() + r0, w.rows, r0, r1);
  };
  // Below ~64K multiply-adds the hand-off costs more than it saves.
  constexpr size_t kMinParallelWork = size_t{1} << 16;
  if (pool == nullptr || pool->n_threads() == 1 || w.rows * w.cols * n_tokens < kMinParallelWork) {
    rows(0, w.rows);
    return;
  }
  pool->parallel_for(0, w.rows, pool->grain_for(w.rows, 8), rows);
}

void swiglu_mlp(ThreadPool* pool, const kernels::WeightMatrix& gate,
                const kernels::WeightMatrix& up, const kernels::WeightMatrix& down,
                std::span<const float> x, size_t n_tokens, std::span<float> out,
                kernels::MatmulActivations mode, MatmulScratch& scratch) {
  TANDEM_CHECK(gate.rows == up.rows && gate.cols == up.cols && down.cols == gate.rows);
  const size_t ffn = gate.rows;
  if (scratch.gate.size() < n_tokens * ffn) scratch.gate.resize(n_tokens * ffn);
  if (scratch.up.size() < n_tokens * ffn) scratch.up.resize(n_tokens * ffn);
  std::span<float> g(scratch.gate.data(), n_tokens * ffn);
  std::span<float> u(scratch.up.data(), n_tokens * ffn);
  pooled_matmul(pool, gate, x, n_tokens, g, mode, scratch);
  pooled_matmul(pool, up, x, n_tokens, u, mode, scratch);
  kernels::silu_mul(g, u, g);
  pooled_matmul(pool, down, g, n_tokens, out, mode, scratch);
}

}  // namespace tandem::experts
