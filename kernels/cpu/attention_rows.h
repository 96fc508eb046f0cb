// The two inner loops of kernels::attention_heads over a run of cached rows (contiguous within a
// KV block), for a range of heads that share them: the scores (dot products) and the weighted
// value sums. Scalar references and AVX2 variants with bit-identical results (the AVX2 ones do the
// same lane-wise fused multiply-adds in the same order, no reassociation;
// they only interleave independent heads, rows and columns to keep the adders busy);
// attention.cpp picks one at run time.
#pragma once

#include <cstddef>

namespace tandem::kernels::detail {

// scores[h * stride + r] = scale * dot(q + h * dim, k + r * k_stride, dim) for h < n_heads,
// r < n_rows, where dot keeps 8 partial sums (lane l: fused multiply-adds of elements l, l + 8, ...
// in order, the tail's element i into lane i % 8) and returns ((l0 + l1) + (l2 + l3)) +
// ((l4 + l5) + (l6 + l7)): dot_f32's order with one rounding per step instead of two.
void attention_scores_scalar(const float* q, size_t n_heads, const float* k, size_t k_stride,
                             size_t n_rows, size_t dim, float scale, float* scores, size_t stride);
void attention_scores_avx2(const float* q, size_t n_heads, const float* k, size_t k_stride,
                           size_t n_rows, size_t dim, float scale, float* scores, size_t stride);
void attention_scores_avx512(const float* q, size_t n_heads, const float* k, size_t k_stride,
                             size_t n_rows, size_t dim, float scale, float* scores, size_t stride);

// For r = 0 .. n_rows - 1 in order: out[h * vdim + d] += w[h * stride + r] * v[r * v_stride + d]
// for h < n_heads, d < vdim (one fused multiply-add).
void attention_accumulate_scalar(const float* w, size_t stride, size_t n_heads, const float* v,
                                 size_t v_stride, size_t n_rows, size_t vdim, float* out);
void attention_accumulate_avx2(const float* w, size_t stride, size_t n_heads, const float* v,
                               size_t v_stride, size_t n_rows, size_t vdim, float* out);
void attention_accumulate_avx512(const float* w, size_t stride, size_t n_heads, const float* v,
                                 size_t v_stride, size_t n_rows, size_t vdim, float* out);

}  // namespace tandem::kernels::detail
