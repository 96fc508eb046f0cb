// pooled_matmul / swiglu_mlp: the matmul kernels split over a ThreadPool by weight rows.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/matmul.h"

namespace tandem::experts {

// Per-caller scratch for the pooled kernels (reused across calls to avoid allocation). Owned by
// one thread (the pool's caller); never shared between two concurrent callers.
struct MatmulScratch {
  kernels::QuantizedActivations xq;
  // pooled_matmuls: the input in each further activation format its matrices ask for.
  std::vector<kernels::QuantizedActivations> more_xq;
  std::vector<float> gate;
  std::vector<float> up;
};

// One matrix of pooled_matmuls and where its products go: y = x · w^T, n_tokens x w.rows floats.
struct MatmulOutput {
  const kernels::WeightMatrix* w = nullptr;
  std::span<float> y;
};

// y = x · W^T (shapes as kernels::matmul) with W's rows split over `pool` (null: the calling
// thread alone). Each y element is computed by exactly one thread with the same arithmetic as a
// single-threaded call, so the result is bit-identical for any thread count. In mode kQuantized x
// is quantized once, on the calling thread, to the format w's type pairs with.
// Called from the pool's owner thread only (ThreadPool::parallel_for's rule).
void pooled_matmul(ThreadPool* pool, const kernels::WeightMatrix& w, std::span<const float> x,
                   size_t n_tokens, std::span<float> y, kernels::MatmulActivations mode,
                   MatmulScratch& scratch);

// pooled_matmul for several matrices of one input (an attention layer's q, k and v; MLA's q_a
// and kv_a; an MLP's gate and up): x is quantized once per activation format the matrices pair
// with (usually one), and one parallel region runs all of their row blocks, where separate calls
// quantized it per matrix and waited for each. Every output element gets pooled_matmul's
// arithmetic, so the results are its bits. Same threading rules.
void pooled_matmuls(ThreadPool* pool, std::span<const MatmulOutput> outputs,
                    std::span<const float> x, size_t n_tokens, kernels::MatmulActivations mode,
                    MatmulScratch& scratch);

// The SwiGLU MLP of an expert, a shared expert or a dense FFN: out = down(silu(gate x) * up x).
// gate and up are [ffn x hidden], down [hidden x ffn]; x holds n_tokens x hidden floats and out
// n_tokens x hidden (overwritten). Same threading rules as pooled_matmul.
void swiglu_mlp(ThreadPool* pool, const kernels::WeightMatrix& gate,
                const kernels::WeightMatrix& up, const kernels::WeightMatrix& down,
                std::span<const float> x, size_t n_tokens, std::span<float> out,
                kernels::MatmulActivations mode, MatmulScratch& scratch);

}  // namespace tandem::experts
