// AVX2 variants of attention_rows.h, bit-identical to the scalar ones: 8 float lanes hold the
// reference's 8 partial sums (lane l sums elements l, l + 8, ...), each step one fused
// multiply-add; the tail and the final reduction are scalar, in the reference's order.
// Speed comes from independent chains: the scores of H heads x R rows (H * R = 8 accumulators) per
// pass, and the value sums of H heads x D column blocks held in registers over all the rows, so
// that no add waits on the one before it and no output is stored per row.
// Built with -mavx2 -mfma -mf16c -ffp-contract=off: nothing here is inline or shared with other
// files, so no AVX2 code reaches a caller on another CPU.
#include <immintrin.h>

#include "kernels/cpu/attention_rows.h"

namespace tandem::kernels::detail {
namespace {

struct Vec {
  using T = __m256;
  static constexpr size_t kWidth = 8;
  static T load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, T v) { _mm256_storeu_ps(p, v); }
  static T set1(float f) { return _mm256_set1_ps(f); }
  static T fma(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
};

}  // namespace
}  // namespace tandem::kernels::detail

#include "kernels/cpu/attention_rows_tiles.h"

namespace tandem::kernels::detail {
namespace {

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
      for (size_t r = 0; r < R; ++r) acc[h][r] = _mm256_fmadd_ps(qv, kv[r], acc[h][r]);
    }
  }
  if (n8 == dim) {
    __m256 sums[H * R];
    float* out[H * R];
#pragma GCC unroll 8
    for (size_t h = 0; h < H; ++h) {
#pragma GCC unroll 8
      for (size_t r = 0; r < R; ++r) {
        sums[h * R + r] = acc[h][r];
        out[h * R + r] = scores + h * stride + r;
      }
    }
    finish_dots(sums, out, scale);
    return;
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
// (scores_all's blocks).
struct Scores {
  template <size_t H, size_t R>
  static void heads(const float* q, const float* k, size_t k_stride, size_t n_rows, size_t dim,
                    float scale, float* scores, size_t stride) {
    size_t r = 0;
    for (; r + R <= n_rows; r += R) {
      scores_tile<H, R>(q, k + r * k_stride, k_stride, dim, scale, scores + r, stride);
    }
    for (; r < n_rows; ++r) {
      scores_tile<H, 1>(q, k + r * k_stride, k_stride, dim, scale, scores + r, stride);
    }
  }
};

}  // namespace

void attention_scores_avx2(const float* q, size_t n_heads, const float* k, size_t k_stride,
                           size_t n_rows, size_t dim, float scale, float* scores, size_t stride) {
  scores_all<Scores>(q, n_heads, k, k_stride, n_rows, dim, scale, scores, stride);
}

void attention_accumulate_avx2(const float* w, size_t stride, size_t n_heads, const float* v,
                               size_t v_stride, size_t n_rows, size_t vdim, float* out) {
  accumulate_all(w, stride, n_heads, v, v_stride, n_rows, vdim, out);
}

}  // namespace tandem::kernels::detail
