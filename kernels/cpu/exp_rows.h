// The row kernels built on exp (kernels::softmax, sigmoid, silu_mul, swiglu_oai_mul): scalar
// references and AVX2 / AVX-512 variants that give the same bits; vector_ops.cpp picks one at run
// time.
#pragma once

#include <cstddef>

namespace tandem::kernels::detail {

// All of them use exp_lanes.h's exp (< 1 ulp from e^x for every float x in [-104, 88], measured):
// the variants differ only in how many lanes run at once. Caller-owned buffers, any thread; an
// output may be its input (in place).

// out[i] = exp(x[i]).
void exp_row_scalar(const float* x, size_t n, float* out);
void exp_row_avx2(const float* x, size_t n, float* out);
void exp_row_avx512(const float* x, size_t n, float* out);

// softmax of row[0 .. n), n >= 1, in place, with an optional extra logit *sink that joins the max
// and the denominator but gets no output weight (attention sinks; nullptr: none). m = the max of
// the row and the sink; e_i = exp(row[i] - m) in float; the e_i are summed in 16 double lanes
// (lane l sums e_l, e_{l+16}, ... in order), the lanes reduced pairwise (l + 8, then + 4, + 2, + 1)
// and exp(*sink - m) added last; row[i] = e_i * float(1 / sum).
void softmax_scalar(float* row, size_t n, const float* sink);
void softmax_avx2(float* row, size_t n, const float* sink);
void softmax_avx512(float* row, size_t n, const float* sink);

// out[i] = 1 / (1 + exp(-x[i])).
void sigmoid_scalar(const float* x, size_t n, float* out);
void sigmoid_avx2(const float* x, size_t n, float* out);
void sigmoid_avx512(const float* x, size_t n, float* out);

// out[i] = gate[i] / (1 + exp(-gate[i])) * up[i].
void silu_mul_scalar(const float* gate, const float* up, size_t n, float* out);
void silu_mul_avx2(const float* gate, const float* up, size_t n, float* out);
void silu_mul_avx512(const float* gate, const float* up, size_t n, float* out);

// out[i] = g / (1 + exp(-alpha g)) * (u + 1) with g = min(gate[i], limit) and
// u = clamp(up[i], -limit, limit) (GPT-OSS's clamped SwiGLU).
void swiglu_oai_scalar(const float* gate, const float* up, size_t n, float alpha, float limit,
                       float* out);
void swiglu_oai_avx2(const float* gate, const float* up, size_t n, float alpha, float limit,
                     float* out);
void swiglu_oai_avx512(const float* gate, const float* up, size_t n, float alpha, float limit,
                       float* out);

}  // namespace tandem::kernels::detail
