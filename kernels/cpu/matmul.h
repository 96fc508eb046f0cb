// matmul: Y = X · W^T for float activations X and a weight matrix W in any dequantizable type,
// plus the llama.cpp-compatible quantized path (int8 dot products through weight_type_table.h).
#pragma once

#include <cstddef>
#include <span>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/vector_ops.h"
#include "kernels/cpu/weight_matrix.h"

namespace tandem::kernels {

// How activations meet the weights.
//  kFloat:     weights are converted to float (exactly, by dequantize()) and dotted with the float
//              activations, accumulating in float. The most accurate.
//  kQuantized: every weight type whose weight_type_table.h row pairs it with a quantized
//              activation format (Q8_0 for Q8_0/Q4_0/MXFP4, Q8_K for Q4_K/Q5_K/Q6_K) meets
//              activation rows quantized to that format, and each block pair is an exact integer
//              dot product scaled by the two block scales: ggml's CPU arithmetic for those types,
//              so results track llama.cpp's, at the cost of the activation rounding (~0.4%
//              relative for Q8_0). Types whose row names kF32 take the kFloat path.
enum class MatmulActivations { kFloat, kQuantized };

// The activation format w's type meets in `mode` (kF32 for the float path).
ActivationFormat matmul_activation_format(TensorType type, MatmulActivations mode);

// The layout the quantized path computes a `type` matrix fastest on with the active variant: its
// row-quad layout where the variant has a SIMD kernel there, else its x8 layout where it has one
// there, else kRows (weight_type_table.h). Copies are made in it with interleave_rows8.
// matmul_rows takes a matrix in any of the type's layouts on every variant (the layout's scalar
// kernel where a variant has none), with bit-identical results to the rows.
WeightLayout preferred_weight_layout(TensorType type);

// preferred_weight_layout(type) != WeightLayout::kRows.
bool interleaved_layout_preferred(TensorType type);

// matmul_rows computes a kRows matrix that carries an interleaved copy (WeightMatrix::interleaved)
// on the copy, for every token count where the active variant has an interleaved kernel. With many
// tokens the interleaved kernels are much faster (docs/benchmarks.md). A lone token used to read
// the rows, which streamed faster than the x8 kernels' earlier four-group tiles; with one-group
// tiles, on a Zen 4 (one thread, a 256 MiB Q4_K matrix from memory) the copy streams at 13-18
// GB/s where the rows give 10, and in cache at 100-134 GFLOP/s against 76-84; whole-model decode
// of the Q4_K_M bench model gained 4-12 % in tokens per CPU-second.

// Shapes, for every function below: x holds n_tokens rows of w.cols floats, y n_tokens rows of
// w.rows floats (row-major): y[t * w.rows + r] = sum_c x[t * w.cols + c] * W[r][c].
// Mismatched spans are bugs of the caller (TANDEM_CHECK).
//
// Threading: the kernels own no threads. A pool splits the W rows: each worker calls a *_rows
// function with its own [row_begin, row_end); they write disjoint elements of y and only read
// w and x, so any number may run at once. Scratch buffers are thread-local to the calling thread
// (grown on demand, kept for reuse). For kQuantized, quantize x once (quantize_activations) before
// fanning out and pass views of the same QuantizedActivations to every worker.
//
// Instruction sets: the work runs on the kernel variant chosen once at run time from CPUID
// (scalar, AVX2, AVX-512, AVX-512 VNNI; see matmul_dispatch.h for choosing one
// and the banner name). Whatever the variant, each output element depends only on its own x row
// and W row, never on the row range, the token count or the thread split, so pooled calls are
// bit-identical to single-threaded ones.
//  - quantized path: bit-identical in every variant to the scalar reference of the type
//    (quant_dot.h states each type's block arithmetic and order).
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
// few hundred. The quantized path reads the rows in place (quant_dot.h).

// Float path over W rows [row_begin, row_end), all tokens.
void matmul_rows(const WeightMatrix& w, std::span<const float> x, size_t n_tokens,
                 std::span<float> y, size_t row_begin, size_t row_end);

// Rows [row_begin, row_end) of x · W^T for activation rows x in the format
// matmul_activation_format(w.type, mode) names (kF32: the float path above; otherwise the type's
// quantized dot product): y[t * y_stride + (r - row_begin)] for t < x.n_tokens and r in the
// range, and no other element (y points at the first row's output of token 0). x.cols == w.cols
// and y_stride >= row_end - row_begin (checked). An interleaved w (any row range) needs the
// quantized path (checked); it gives the same bits as its rows.
void matmul_rows(const WeightMatrix& w, const ActivationRows& x, float* y, size_t y_stride,
                 size_t row_begin, size_t row_end);

// The whole matrix on the calling thread, in the given mode (see MatmulActivations).
void matmul(const WeightMatrix& w, std::span<const float> x, size_t n_tokens, std::span<float> y,
            MatmulActivations mode = MatmulActivations::kFloat);

}  // namespace tandem::kernels
