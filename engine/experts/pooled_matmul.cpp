// pooled_matmul / swiglu_mlp: row-split matmuls over a ThreadPool.
#include "engine/experts/pooled_matmul.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/cpu/vector_ops.h"

namespace tandem::experts {
namespace {

// Below ~64K multiply-adds the hand-off costs more than it saves.
constexpr size_t kMinParallelWork = size_t{1} << 16;

}  // namespace

void pooled_matmul(ThreadPool* pool, const kernels::WeightMatrix& w, std::span<const float> x,
                   size_t n_tokens, std::span<float> y, kernels::MatmulActivations mode,
                   MatmulScratch& scratch) {
  TANDEM_CHECK(x.size() == n_tokens * w.cols);
  TANDEM_CHECK(y.size() == n_tokens * w.rows);
  const MatmulOutput output[] = {{&w, y}};
  pooled_matmuls(pool, output, x, n_tokens, mode, scratch);
}

void pooled_matmuls(ThreadPool* pool, std::span<const MatmulOutput> outputs,
                    std::span<const float> x, size_t n_tokens, kernels::MatmulActivations mode,
                    MatmulScratch& scratch) {
  if (n_tokens == 0 || outputs.empty()) return;
  const size_t cols = outputs[0].w->cols;
  TANDEM_CHECK(x.size() == n_tokens * cols);
  // The input in each format the matrices pair with, quantized once: the first into scratch.xq,
  // any other into scratch.more_xq.
  constexpr size_t kMaxOutputs = 8;
  TANDEM_CHECK(outputs.size() <= kMaxOutputs);
  kernels::ActivationFormat formats[kMaxOutputs];
  size_t n_formats = 0;
  size_t view_of_output[kMaxOutputs];
  size_t rows = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const kernels::WeightMatrix& w = *outputs[i].w;
    TANDEM_CHECK(w.cols == cols && outputs[i].y.size() == n_tokens * w.rows);
    rows += w.rows;
    const kernels::ActivationFormat format = kernels::matmul_activation_format(w.type, mode);
    size_t f = 0;
    while (f < n_formats && formats[f] != format) ++f;
    if (f == n_formats) formats[n_formats++] = format;
    view_of_output[i] = f;
  }
  if (scratch.more_xq.size() + 1 < n_formats) scratch.more_xq.resize(n_formats - 1);
  kernels::ActivationRows views[kMaxOutputs];
  for (size_t f = 0; f < n_formats; ++f) {
    if (formats[f] == kernels::ActivationFormat::kF32) {
      views[f] = kernels::ActivationRows{formats[f], n_tokens, cols, x.data()};
      continue;
    }
    kernels::QuantizedActivations& q = f == 0 ? scratch.xq : scratch.more_xq[f - 1];
    kernels::quantize_activations(formats[f], x, n_tokens, cols, q);
    views[f] = kernels::view_of(q);
  }
  if (pool == nullptr || pool->n_threads() == 1 || rows * cols * n_tokens < kMinParallelWork) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      const kernels::WeightMatrix& w = *outputs[i].w;
      kernels::matmul_rows(w, views[view_of_output[i]], outputs[i].y.data(), w.rows, 0, w.rows);
    }
    return;
  }
  // Row blocks of about a quarter of a thread's share of all the rows, in multiples of 8 (the
  // interleaved layouts' groups), every matrix cut on its own: items [first_item[i],
  // first_item[i + 1]) are matrix i's blocks, in order.
  const size_t per = std::max<size_t>(8, (pool->grain_for(rows, 8) + 7) / 8 * 8);
  size_t first_item[kMaxOutputs + 1];
  first_item[0] = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    first_item[i + 1] = first_item[i] + (outputs[i].w->rows + per - 1) / per;
  }
  auto items = [&](size_t b, size_t e) {
    for (size_t item = b; item < e; ++item) {
      size_t i = 0;
      while (item >= first_item[i + 1]) ++i;
      const kernels::WeightMatrix& w = *outputs[i].w;
      const size_t r0 = (item - first_item[i]) * per;
      const size_t r1 = std::min(w.rows, r0 + per);
      kernels::matmul_rows(w, views[view_of_output[i]], outputs[i].y.data() + r0, w.rows, r0, r1);
    }
  };
  pool->parallel_for(0, first_item[outputs.size()], 1, items);
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
  const MatmulOutput gate_up[] = {{&gate, g}, {&up, u}};
  pooled_matmuls(pool, gate_up, x, n_tokens, mode, scratch);
  kernels::silu_mul(g, u, g);
  pooled_matmul(pool, down, g, n_tokens, out, mode, scratch);
}

}  // namespace tandem::experts
