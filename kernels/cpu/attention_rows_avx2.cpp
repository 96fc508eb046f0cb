// AVX2 variants of attention_rows.h, bit-identical to the scalar ones: 8 float lanes hold
// dot_f32's 8 partial sums (lane l sums elements l, l + 8, ...), each step a separate multiply and
// add (-ffp-contract=off; no FMA); the tail and the final reduction are scalar, in dot_f32's order.
// Speed comes from independent chains: the scores of H heads x R rows (H * R = 8 accumulators) per
// pass, and the value sums of H heads x D column blocks held in registers over all the rows, so
// that no add waits on the one before it and no output is stored per row.
// Built with -mavx2 -mfma -mf16c -ffp-contract=off: nothing here is inline or shared with other
// files, so no AVX2 code reaches a caller on another CPU.
#include <immintrin.h>

#include "kernels/cpu/attention_rows.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kChains = 8;  // independent accumulators per pass

// dot_f32's final reduction of the 8 lanes plus the scalar tail.
[[gnu::always_inline]] inline float finish_dot(__m256 acc, const float* a, const float* b,
                                               size_t n8, size_t dim) {
  float lane[8];
  _mm256_storeu_ps(lane, acc);
  for (size_t i = n8; i < dim; ++i) lane[i % 8] += a[i] * b[i];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// Heads [0, H) x rows [0, R) of one pass.
template <size_t H, size_t R>
void scores_tile(const float* q, const float* k, size_t k_stride, size_t dim, float scale,
                 float* scores, size_t stride) {
  const size_t n8 = dim / 8 * 8;
  __m256 acc[H][R];
#pragma GCC unroll 8
  for (size_t h = 0; h < H; ++h) {
#pragma GCC unroll 8
    for (size_t r = 0; r < R; ++r) acc[h][r] = _mm256_setzero_ps();
  }
  for (size_t i = 0; i < n8; i += 8) {
    __m256 kv[R];
#pragma GCC unroll 8
    for (size_t r = 0; r < R; ++r) kv[r] = _mm256_loadu_ps(k + r * k_stride + i);
#pragma GCC unroll 8
    for (size_t h = 0; h < H; ++h) {
      const __m256 qv = _mm256_loadu_ps(q + h * dim + i);
#pragma GCC unroll 8
      for (size_t r = 0; r < R; ++r) acc[h][r] = _mm256_add_ps(acc[h][r], _mm256_mul_ps(qv, kv[r]));
    }
  }
#pragma GCC unroll 8
  for (size_t h = 0; h < H; ++h) {
#pragma GCC unroll 8
    for (size_t r = 0; r < R; ++r) {
      scores[h * stride + r] =
          scale * finish_dot(acc[h][r], q + h * dim, k + r * k_stride, n8, dim);
    }
  }
}

// Heads [0, H) x all rows, R rows per pass (the last rows one at a time).
template <size_t H, size_t R>
void scores_heads(const float* q, const float* k, size_t k_stride, size_t n_rows, size_t dim,
                  float scale, float* scores, size_t stride) {
  size_t r = 0;
  for (; r + R <= n_rows; r += R) {
    scores_tile<H, R>(q, k + r * k_stride, k_stride, dim, scale, scores + r, stride);
  }
  for (; r < n_rows; ++r)
    scores_tile<H, 1>(q, k + r * k_stride, k_stride, dim, scale, scores + r, stride);
}

// Heads [0, H) x column blocks [0, D) (8 floats each) at column d0, over all rows in order.
template <size_t H, size_t D>
void accumulate_tile(const float* w, size_t stride, const float* v, size_t v_stride, size_t n_rows,
                     size_t vdim, size_t d0, float* out) {
  __m256 acc[H][D];
#pragma GCC unroll 8
  for (size_t h = 0; h < H; ++h) {
#pragma GCC unroll 8
    for (size_t c = 0; c < D; ++c) acc[h][c] = _mm256_loadu_ps(out + h * vdim + d0 + 8 * c);
  }
  for (size_t r = 0; r < n_rows; ++r) {
    __m256 vv[D];
#pragma GCC unroll 8
    for (size_t c = 0; c < D; ++c) vv[c] = _mm256_loadu_ps(v + r * v_stride + d0 + 8 * c);
#pragma GCC unroll 8
    for (size_t h = 0; h < H; ++h) {
      const __m256 wv = _mm256_set1_ps(w[h * stride + r]);
#pragma GCC unroll 8
      for (size_t c = 0; c < D; ++c) acc[h][c] = _mm256_add_ps(acc[h][c], _mm256_mul_ps(wv, vv[c]));
    }
  }
#pragma GCC unroll 8
  for (size_t h = 0; h < H; ++h) {
#pragma GCC unroll 8
    for (size_t c = 0; c < D; ++c) _mm256_storeu_ps(out + h * vdim + d0 + 8 * c, acc[h][c]);
  }
}

// Heads [0, H) x all columns, D blocks per pass (then single blocks, then the scalar tail).
template <size_t H, size_t D>
void accumulate_heads(const float* w, size_t stride, const float* v, size_t v_stride, size_t n_rows,
                      size_t vdim, float* out) {
  const size_t n8 = vdim / 8 * 8;
  size_t d = 0;
  for (; d + 8 * D <= n8; d += 8 * D)
    accumulate_tile<H, D>(w, stride, v, v_stride, n_rows, vdim, d, out);
  for (; d < n8; d += 8) accumulate_tile<H, 1>(w, stride, v, v_stride, n_rows, vdim, d, out);
  for (; d < vdim; ++d) {
#pragma GCC unroll 8
    for (size_t h = 0; h < H; ++h) {
      float o = out[h * vdim + d];
      for (size_t r = 0; r < n_rows; ++r) o += w[h * stride + r] * v[r * v_stride + d];
      out[h * vdim + d] = o;
    }
  }
}

}  // namespace

void attention_scores_avx2(const float* q, size_t n_heads, const float* k, size_t k_stride,
                           size_t n_rows, size_t dim, float scale, float* scores, size_t stride) {
  size_t h = 0;
  for (; h + 8 <= n_heads; h += 8) {
    scores_heads<8, 1>(q + h * dim, k, k_stride, n_rows, dim, scale, scores + h * stride, stride);
  }
  const size_t left = n_heads - h;
  const float* qh = q + h * dim;
  float* sh = scores + h * stride;
  if (left >= 4) {
    scores_heads<4, kChains / 4>(qh, k, k_stride, n_rows, dim, scale, sh, stride);
    h += 4;
    qh += 4 * dim;
    sh += 4 * stride;
  }
  if (n_heads - h >= 2) {
    scores_heads<2, kChains / 2>(qh, k, k_stride, n_rows, dim, scale, sh, stride);
    h += 2;
    qh += 2 * dim;
    sh += 2 * stride;
  }
  if (n_heads - h == 1) scores_heads<1, kChains>(qh, k, k_stride, n_rows, dim, scale, sh, stride);
  // The callers (softmax, libm's exp) are SSE code: leaving the upper halves dirty made them about
  // 20x slower on a Xeon (the SSE/AVX false-dependency penalty).
  _mm256_zeroupper();
}

void attention_accumulate_avx2(const float* w, size_t stride, size_t n_heads, const float* v,
                               size_t v_stride, size_t n_rows, size_t vdim, float* out) {
  size_t h = 0;
  for (; h + 8 <= n_heads; h += 8) {
    accumulate_heads<8, 1>(w + h * stride, stride, v, v_stride, n_rows, vdim, out + h * vdim);
  }
  if (n_heads - h >= 4) {
    accumulate_heads<4, kChains / 4>(w + h * stride, stride, v, v_stride, n_rows, vdim,
                                     out + h * vdim);
    h += 4;
  }
  if (n_heads - h >= 2) {
    accumulate_heads<2, kChains / 2>(w + h * stride, stride, v, v_stride, n_rows, vdim,
                                     out + h * vdim);
    h += 2;
  }
  if (n_heads - h == 1) {
    accumulate_heads<1, kChains>(w + h * stride, stride, v, v_stride, n_rows, vdim, out + h * vdim);
  }
  _mm256_zeroupper();
}

}  // namespace tandem::kernels::detail
