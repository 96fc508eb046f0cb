// matmul: Y = X · W^T for float activations X and a weight matrix W in any dequantizable type,
// plus the llama.cpp-compatible int8 path (Q8_0 weights x Q8_0-quantized activations).
#pragma once

#include <cstddef>
#include <span>

#include "kernels/cpu/quantize_q8_0.h"
#include "kernels/cpu/vector_ops.h"
#include "kernels/cpu/weight_matrix.h"

namespace tandem::kernels {

// How activations meet the weights.
//  kFloat: weights are converted to float (exactly, by dequantize()) and dotted with the float
//          activations, accumulating in float. The default, and the most accurate.
//  kQ8_0:  for Q8_0 weights only, each activation row is first quantized to Q8_0 blocks
//          (quantize_q8_0_activations) and every block pair is an exact int32 dot product scaled
//          by the two block scales: what ggml's CPU backend does for Q8_0 weights, so results
//          track llama.cpp's more closely, at the cost of ~0.4% relative activation rounding.
//          Weights of any other type ignore this mode and take the kFloat path (ggml pairs them
//          with other activation formats, F16 or Q8_K, that are not implemented here).
enum class MatmulActivations { kFloat, kQ8_0 };

// Shapes, for every function below: x holds n_tokens rows of w.cols floats, y n_tokens rows of
// w.rows floats (row-major): y[t * w.rows + r] = sum_c x[t * w.cols + c] * W[r][c].
// Mismatched spans are bugs of the caller (TANDEM_CHECK).
//
// Threading: the kernels own no threads. A pool splits the W rows: each worker calls a *_rows
// function with its own [row_begin, row_end); they write disjoint elements of y and only read
// w and x, so any number may run at once. Scratch buffers are thread-local to the calling thread
// (grown on demand, kept for reuse). For kQ8_0, quantize x once (quantize_q8_0_activations) before
// fanning out and pass the same Q8_0Activations to every worker.
//
// Instruction sets: the work runs on the kernel variant chosen once at run time from CPUID
// (scalar, AVX2, AVX-512, AVX-512 VNNI; see matmul_dispatch.h for the TANDEM_CPU_KERNELS override
// and the banner name). Whatever the variant, each output element depends only on its own x row
// and W row, never on the row range, the token count or the thread split, so pooled calls are
// bit-identical to single-threaded ones.
//  - kQ8_0 (int8) path: bit-identical in every variant to the scalar reference described at
//    matmul_rows_q8_0 (SIMD sums 8 rows' exact block sums at once, lane per row, in block order).
//  - kFloat path: W converted to float exactly (bit-equal to dequantize()) in every variant; the
//    dot products sum in a different order per variant (SIMD: two FMA chains of 8 or 16 lanes,
//    then a fixed tree). Variants differ from the scalar reference by at most
//    (cols / 4 + 16) * 2^-24 * sum_c |x_c W[r][c]| per element (1.2e-5 relative to that sum at
//    cols = 768; the two rounding-error bounds added); each stays within
//    cols * 2^-24 * sum_c |x_c W[r][c]| of the exact product.
//
// Cost model: W rows are converted in tiles (16 KiB of floats for up to 4 tokens, 64 KiB
// otherwise), and each converted tile is dotted with every token before the next tile, so W is
// read and converted once per call and x is streamed once per tile; efficient from 1 token to a
// few hundred. The int8 path reads Q8_0 rows in place for 1-2 tokens and unpacks tiles beyond.

// Float path over W rows [row_begin, row_end), all tokens.
void matmul_rows(const WeightMatrix& w, std::span<const float> x, size_t n_tokens,
                 std::span<float> y, size_t row_begin, size_t row_end);

// Int8 path over W rows [row_begin, row_end): w.type must be kQ8_0 and xq.cols == w.cols
// (checked). y holds xq.n_tokens rows of w.rows floats. Per block: float(sum of 32 int8 products)
// * (d_w * d_x), accumulated in float in block order, as ggml's reference vec_dot_q8_0_q8_0.
void matmul_rows_q8_0(const WeightMatrix& w, const Q8_0Activations& xq, std::span<float> y,
                      size_t row_begin, size_t row_end);

// The whole matrix on the calling thread, in the given mode (see MatmulActivations).
void matmul(const WeightMatrix& w, std::span<const float> x, size_t n_tokens, std::span<float> y,
            MatmulActivations mode = MatmulActivations::kFloat);

}  // namespace tandem::kernels
