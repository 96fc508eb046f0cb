// AVX2 variants of attention_rows.h, bit-identical to the scalar ones: 8 float lanes hold the
// reference's 8 partial sums (lane l sums elements l, l + 8, ...), each step one fused
// multiply-add; the tail and the final reduction are scalar, in the reference's order.
// Speed comes from independent chains and few loads per multiply-add: the scores of 4 heads x 3
// rows (12 accumulators) per pass, and the value sums of 3 heads x 4 column blocks held in
// registers over a run of rows, so that no add waits on the one before it and no output is stored
// per row; and from runs of rows that stay in L1 while every head of the call reads them (a
// 2,048-token prefill's gathered rows of one kv head are 1 MiB, past L2).
// Built with -mavx2 -mfma -mf16c -ffp-contract=off: nothing here is inline or shared with other
// files, so no AVX2 code reaches a caller on another CPU.
#include <immintrin.h>

#include <cmath>
#include <cstddef>

#include "kernels/cpu/attention_rows.h"
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

// Heads [0, H) x rows [0, n_rows), R rows per pass (the last rows one at a time).
template <size_t H, size_t R>
void scores_heads(const float* q, const float* k, size_t k_stride, size_t n_rows, size_t dim,
                  float scale, float* scores, size_t stride) {
  size_t r = 0;
  for (; r + R <= n_rows; r += R) {
    scores_tile<H, R>(q, k + r * k_stride, k_stride, dim, scale, scores + r, stride);
  }
  for (; r < n_rows; ++r) {
    scores_tile<H, 1>(q, k + r * k_stride, k_stride, dim, scale, scores + r, stride);
  }
}

// Heads [0, H) x column blocks [0, D) at column d0 over rows [0, n_rows): accumulate_tile's
// arithmetic (one fused multiply-add per element and row, rows in order) with the H weights
// broadcast first and one value block live at a time, so that 3 x 4 tiles (12 chains) keep
// their weights, a value block and the 12 sums in the 16 registers.
template <size_t H, size_t D>
void accumulate_block(const float* w, size_t stride, const float* v, size_t v_stride, size_t n_rows,
                      size_t vdim, size_t d0, float* out) {
  __m256 acc[H][D];
#pragma GCC unroll 8
  for (size_t h = 0; h < H; ++h) {
#pragma GCC unroll 8
    for (size_t c = 0; c < D; ++c) acc[h][c] = _mm256_loadu_ps(out + h * vdim + d0 + 8 * c);
  }
  for (size_t r = 0; r < n_rows; ++r) {
    __m256 wv[H];
#pragma GCC unroll 8
    for (size_t h = 0; h < H; ++h) wv[h] = _mm256_broadcast_ss(w + h * stride + r);
    const float* vr = v + r * v_stride + d0;
#pragma GCC unroll 8
    for (size_t c = 0; c < D; ++c) {
      const __m256 vv = _mm256_loadu_ps(vr + 8 * c);
#pragma GCC unroll 8
      for (size_t h = 0; h < H; ++h) acc[h][c] = _mm256_fmadd_ps(wv[h], vv, acc[h][c]);
    }
  }
#pragma GCC unroll 8
  for (size_t h = 0; h < H; ++h) {
#pragma GCC unroll 8
    for (size_t c = 0; c < D; ++c) _mm256_storeu_ps(out + h * vdim + d0 + 8 * c, acc[h][c]);
  }
}

// Heads [0, H) x value columns [0, vdim): tiles of D column blocks while they last, then of 4
// (where D is more), then one of fewer, then the scalar tail; every element's chain goes over the
// rows in order, as the reference's.
template <size_t H, size_t D>
void accumulate_columns(const float* w, size_t stride, const float* v, size_t v_stride,
                        size_t n_rows, size_t vdim, float* out) {
  const size_t blocks = vdim / 8;
  size_t c = 0;
  for (; c + D <= blocks; c += D) {
    accumulate_block<H, D>(w, stride, v, v_stride, n_rows, vdim, 8 * c, out);
  }
  if constexpr (D > 4) {
    for (; c + 4 <= blocks; c += 4) {
      accumulate_block<H, 4>(w, stride, v, v_stride, n_rows, vdim, 8 * c, out);
    }
  }
  switch (blocks - c) {
    case 3:
      accumulate_block<H, 3>(w, stride, v, v_stride, n_rows, vdim, 8 * c, out);
      break;
    case 2:
      accumulate_block<H, 2>(w, stride, v, v_stride, n_rows, vdim, 8 * c, out);
      break;
    case 1:
      accumulate_block<H, 1>(w, stride, v, v_stride, n_rows, vdim, 8 * c, out);
      break;
    default:
      break;
  }
  for (size_t d = 8 * blocks; d < vdim; ++d) {
    for (size_t h = 0; h < H; ++h) {
      float o = out[h * vdim + d];
      for (size_t r = 0; r < n_rows; ++r) o = std::fma(w[h * stride + r], v[r * v_stride + d], o);
      out[h * vdim + d] = o;
    }
  }
}

}  // namespace

// Runs of chunk_rows rows; in each, head blocks of 4 x 3 rows (12 chains: 7 loads per 12 fused
// multiply-adds, where 8 heads x 1 row took 9 per 8), then 2 x 4 and 1 x 8.
void attention_scores_avx2(const float* q, size_t n_heads, const float* k, size_t k_stride,
                           size_t n_rows, size_t dim, float scale, float* scores, size_t stride) {
  const size_t chunk = chunk_rows(dim);
  for (size_t r0 = 0; r0 < n_rows; r0 += chunk) {
    const size_t nr = chunk < n_rows - r0 ? chunk : n_rows - r0;
    const float* kr = k + r0 * k_stride;
    float* sr = scores + r0;
    size_t h = 0;
    for (; h + 4 <= n_heads; h += 4) {
      scores_heads<4, 3>(q + h * dim, kr, k_stride, nr, dim, scale, sr + h * stride, stride);
    }
    if (n_heads - h >= 2) {
      scores_heads<2, 4>(q + h * dim, kr, k_stride, nr, dim, scale, sr + h * stride, stride);
      h += 2;
    }
    if (n_heads - h == 1) {
      scores_heads<1, 8>(q + h * dim, kr, k_stride, nr, dim, scale, sr + h * stride, stride);
    }
  }
  // The callers (softmax, libm's exp) are SSE code: leaving the upper halves dirty made them about
  // 20x slower on a Xeon (the SSE/AVX false-dependency penalty).
  _mm256_zeroupper();
}

// Runs of chunk_rows rows, in order; in each, head blocks of 4 x 3 column blocks (12 chains: 3
// value loads and 4 weight broadcasts per 12 fused multiply-adds), then 2 x 4 and 1 x 8. Each
// output element's chain goes on from run to run through out.
void attention_accumulate_avx2(const float* w, size_t stride, size_t n_heads, const float* v,
                               size_t v_stride, size_t n_rows, size_t vdim, float* out) {
  const size_t chunk = chunk_rows(vdim);
  for (size_t r0 = 0; r0 < n_rows; r0 += chunk) {
    const size_t nr = chunk < n_rows - r0 ? chunk : n_rows - r0;
    const float* vr = v + r0 * v_stride;
    const float* wr = w + r0;
    size_t h = 0;
    for (; h + 3 <= n_heads; h += 3) {
      accumulate_columns<3, 4>(wr + h * stride, stride, vr, v_stride, nr, vdim, out + h * vdim);
    }
    if (n_heads - h == 2) {
      accumulate_columns<2, 4>(wr + h * stride, stride, vr, v_stride, nr, vdim, out + h * vdim);
    } else if (n_heads - h == 1) {
      accumulate_columns<1, 8>(wr + h * stride, stride, vr, v_stride, nr, vdim, out + h * vdim);
    }
  }
  _mm256_zeroupper();  // as in attention_scores_avx2
}

}  // namespace tandem::kernels::detail
