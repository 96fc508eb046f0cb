// AVX-512 (F) variants of attention_rows.h, bit-identical to the scalar ones (and to the AVX2
// ones): a 512-bit register holds the reference's 8 partial sums of two cached rows at once (lanes
// 0-7 the first row, 8-15 the second), each step one fused multiply-add, the tail and the final
// reduction scalar, in the reference's order; the value sums are
// element-wise, 16 columns per register. As in attention_rows_avx2.cpp, heads x rows (or heads x
// column blocks) make 8 independent chains per pass, over runs of rows that stay in L1.
// Built with the AVX-512 flags: nothing here is inline or shared with other files.
#include <immintrin.h>

#include "kernels/cpu/attention_rows.h"

namespace tandem::kernels::detail {
namespace {

struct Vec {
  using T = __m512;
  static constexpr size_t kWidth = 16;
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static T set1(float f) { return _mm512_set1_ps(f); }
  static T fma(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
};

}  // namespace
}  // namespace tandem::kernels::detail

#include "kernels/cpu/attention_rows_tiles.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kChains = 8;  // independent accumulators per pass

// The walks below (value sums of H heads x D column blocks held in registers over a run of rows;
// head blocks of 8, 4, 2 and 1, H x P = kChains independent chains per pass) on Vec.

// Heads [0, H) x column blocks [0, D) (Vec::kWidth floats each) at column d0, over the run's rows
// in order: one fused multiply-add per element and row, as the scalar reference.
template <size_t H, size_t D>
void accumulate_tile(const float* w, size_t stride, const float* v, size_t v_stride, size_t n_rows,
                     size_t vdim, size_t d0, float* out) {
  constexpr size_t kW = Vec::kWidth;
  typename Vec::T acc[H][D];
#pragma GCC unroll 8
  for (size_t h = 0; h < H; ++h) {
#pragma GCC unroll 8
    for (size_t c = 0; c < D; ++c) acc[h][c] = Vec::load(out + h * vdim + d0 + kW * c);
  }
  for (size_t r = 0; r < n_rows; ++r) {
    typename Vec::T vv[D];
#pragma GCC unroll 8
    for (size_t c = 0; c < D; ++c) vv[c] = Vec::load(v + r * v_stride + d0 + kW * c);
#pragma GCC unroll 8
    for (size_t h = 0; h < H; ++h) {
      const typename Vec::T wv = Vec::set1(w[h * stride + r]);
#pragma GCC unroll 8
      for (size_t c = 0; c < D; ++c) acc[h][c] = Vec::fma(wv, vv[c], acc[h][c]);
    }
  }
#pragma GCC unroll 8
  for (size_t h = 0; h < H; ++h) {
#pragma GCC unroll 8
    for (size_t c = 0; c < D; ++c) Vec::store(out + h * vdim + d0 + kW * c, acc[h][c]);
  }
}

// Heads [0, H) x all columns: D blocks per pass, then single blocks, then the scalar tail.
template <size_t H, size_t D>
void accumulate_heads(const float* w, size_t stride, const float* v, size_t v_stride, size_t n_rows,
                      size_t vdim, float* out) {
  constexpr size_t kW = Vec::kWidth;
  const size_t whole = vdim / kW * kW;
  size_t d = 0;
  for (; d + kW * D <= whole; d += kW * D) {
    accumulate_tile<H, D>(w, stride, v, v_stride, n_rows, vdim, d, out);
  }
  for (; d < whole; d += kW) accumulate_tile<H, 1>(w, stride, v, v_stride, n_rows, vdim, d, out);
  for (; d < vdim; ++d) {
    for (size_t h = 0; h < H; ++h) {
      float o = out[h * vdim + d];
      for (size_t r = 0; r < n_rows; ++r) o = std::fma(w[h * stride + r], v[r * v_stride + d], o);
      out[h * vdim + d] = o;
    }
  }
}

// attention_accumulate_* on Vec.
void accumulate_all(const float* w, size_t stride, size_t n_heads, const float* v, size_t v_stride,
                    size_t n_rows, size_t vdim, float* out) {
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
}

// attention_scores_* over head blocks of 8, 4, 2, 1, with the file's Scores::heads<H, P> (H heads
// x P row units per pass, H x P = kChains; all rows of the run).
template <typename Scores>
void scores_all(const float* q, size_t n_heads, const float* k, size_t k_stride, size_t n_rows,
                size_t dim, float scale, float* scores, size_t stride) {
  size_t h = 0;
  for (; h + 8 <= n_heads; h += 8) {
    Scores::template heads<8, 1>(q + h * dim, k, k_stride, n_rows, dim, scale, scores + h * stride,
                                 stride);
  }
  if (n_heads - h >= 4) {
    Scores::template heads<4, kChains / 4>(q + h * dim, k, k_stride, n_rows, dim, scale,
                                           scores + h * stride, stride);
    h += 4;
  }
  if (n_heads - h >= 2) {
    Scores::template heads<2, kChains / 2>(q + h * dim, k, k_stride, n_rows, dim, scale,
                                           scores + h * stride, stride);
    h += 2;
  }
  if (n_heads - h == 1) {
    Scores::template heads<1, kChains>(q + h * dim, k, k_stride, n_rows, dim, scale,
                                       scores + h * stride, stride);
  }
}

[[gnu::always_inline]] inline __m256 upper_half(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// Heads [0, H) x row pairs [0, P) of one pass: rows k + (2p) k_stride and k + (2p + 1) k_stride,
// with lone_last the last pair's second row is its first again (a lone last row) and that
// half's sums are dropped.
template <size_t H, size_t P>
void scores_tile(const float* q, const float* k, size_t k_stride, bool lone_last, size_t dim,
                 float scale, float* scores, size_t stride) {
  const size_t n8 = dim / 8 * 8;
  __m512 acc[H][P];
#pragma GCC unroll 8
  for (size_t h = 0; h < H; ++h) {
#pragma GCC unroll 8
    for (size_t p = 0; p < P; ++p) acc[h][p] = _mm512_setzero_ps();
  }
  const float* row[2 * P];
#pragma GCC unroll 8
  for (size_t p = 0; p < P; ++p) {
    row[2 * p] = k + 2 * p * k_stride;
    row[2 * p + 1] = lone_last && p + 1 == P ? row[2 * p] : row[2 * p] + k_stride;
  }
  for (size_t i = 0; i < n8; i += 8) {
    __m512 kv[P];
#pragma GCC unroll 8
    for (size_t p = 0; p < P; ++p) {
      kv[p] = _mm512_castpd_ps(_mm512_insertf64x4(
          _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_loadu_ps(row[2 * p] + i))),
          _mm256_castps_pd(_mm256_loadu_ps(row[2 * p + 1] + i)), 1));
    }
#pragma GCC unroll 8
    for (size_t h = 0; h < H; ++h) {
      const __m512 qv = _mm512_castpd_ps(
          _mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(q + h * dim + i))));
#pragma GCC unroll 8
      for (size_t p = 0; p < P; ++p) acc[h][p] = _mm512_fmadd_ps(qv, kv[p], acc[h][p]);
    }
  }
  if (n8 == dim) {
    __m256 sums[2 * H * P];
    float* out[2 * H * P];
#pragma GCC unroll 8
    for (size_t h = 0; h < H; ++h) {
#pragma GCC unroll 8
      for (size_t p = 0; p < P; ++p) {
        sums[2 * (h * P + p)] = _mm512_castps512_ps256(acc[h][p]);
        sums[2 * (h * P + p) + 1] = upper_half(acc[h][p]);
        out[2 * (h * P + p)] = scores + h * stride + 2 * p;
        out[2 * (h * P + p) + 1] =
            lone_last && p + 1 == P ? nullptr : scores + h * stride + 2 * p + 1;
      }
    }
    finish_dots(sums, out, scale);
    return;
  }
#pragma GCC unroll 8
  for (size_t h = 0; h < H; ++h) {
    const float* qh = q + h * dim;
#pragma GCC unroll 8
    for (size_t p = 0; p < P; ++p) {
      scores[h * stride + 2 * p] =
          scale * finish_dot(_mm512_castps512_ps256(acc[h][p]), qh, row[2 * p], n8, dim);
      if (!(lone_last && p + 1 == P)) {
        scores[h * stride + 2 * p + 1] =
            scale * finish_dot(upper_half(acc[h][p]), qh, row[2 * p + 1], n8, dim);
      }
    }
  }
}

// Heads [0, H) x all rows of the run, P pairs per pass (then single pairs, then a lone row).
// (scores_all's blocks).
struct Scores {
  template <size_t H, size_t P>
  static void heads(const float* q, const float* k, size_t k_stride, size_t n_rows, size_t dim,
                    float scale, float* scores, size_t stride) {
    size_t r = 0;
    for (; r + 2 * P <= n_rows; r += 2 * P) {
      scores_tile<H, P>(q, k + r * k_stride, k_stride, false, dim, scale, scores + r, stride);
    }
    for (; r + 2 <= n_rows; r += 2) {
      scores_tile<H, 1>(q, k + r * k_stride, k_stride, false, dim, scale, scores + r, stride);
    }
    if (r < n_rows) {
      scores_tile<H, 1>(q, k + r * k_stride, k_stride, true, dim, scale, scores + r, stride);
    }
  }
};

}  // namespace

// Runs of chunk_rows rows (as attention_rows_avx2.cpp), every head block over each run.
void attention_scores_avx512(const float* q, size_t n_heads, const float* k, size_t k_stride,
                             size_t n_rows, size_t dim, float scale, float* scores, size_t stride) {
  const size_t chunk = chunk_rows(dim);
  for (size_t r0 = 0; r0 < n_rows; r0 += chunk) {
    const size_t nr = chunk < n_rows - r0 ? chunk : n_rows - r0;
    scores_all<Scores>(q, n_heads, k + r0 * k_stride, k_stride, nr, dim, scale, scores + r0,
                       stride);
  }
  // The callers (softmax, libm's exp) are SSE code: leaving the upper halves dirty made them about
  // 20x slower on a Xeon (the SSE/AVX false-dependency penalty).
  _mm256_zeroupper();
}

// Runs of chunk_rows rows, in order; each output element's chain goes on from run to run through
// out, so the bits are those of one walk over all the rows.
void attention_accumulate_avx512(const float* w, size_t stride, size_t n_heads, const float* v,
                                 size_t v_stride, size_t n_rows, size_t vdim, float* out) {
  const size_t chunk = chunk_rows(vdim);
  for (size_t r0 = 0; r0 < n_rows; r0 += chunk) {
    const size_t nr = chunk < n_rows - r0 ? chunk : n_rows - r0;
    accumulate_all(w + r0, stride, n_heads, v + r0 * v_stride, v_stride, nr, vdim, out);
  }
  _mm256_zeroupper();  // as in attention_scores_avx512
}

}  // namespace tandem::kernels::detail
