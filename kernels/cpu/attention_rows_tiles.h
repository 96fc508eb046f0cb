// The parts of the SIMD attention row kernels (attention_rows.h) that do not depend on the vector
// width, shared by attention_rows_avx2.cpp and attention_rows_avx512.cpp: dot_f32's final
// reduction (one product at a time, or four at once through hadd where there is no tail), the value
// sums of H heads x D column blocks held in registers over all the rows, and the walk over head
// blocks of 8, 4, 2 and 1 (H x P = kChains independent chains per pass). Each file includes it
// under its own -m flags after defining, in tandem::kernels::detail's anonymous namespace, a struct
// Vec with:
//   using T (the register type); static constexpr size_t kWidth (floats per register);
//   static T load(const float*), set1(float), fma(T a, T b, T c) (a * b + c, one rounding);
//   static void store(float*, T).
// and, for scores_all, a struct with template <size_t H, size_t P> static void heads(...) of the
// shape of attention_scores_* for H heads.
// Everything here has internal linkage (see quant_dot_kquants_tiles.h for why).
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstddef>

namespace tandem::kernels::detail {
namespace {

constexpr size_t kChains = 8;  // independent accumulators per pass

// The final reduction of the 8 lanes plus the scalar tail (elements n8 .. dim of a, b), as
// attention_scores_scalar.
[[gnu::always_inline]] inline float finish_dot(__m256 acc, const float* a, const float* b,
                                               size_t n8, size_t dim) {
  float lane[8];
  _mm256_storeu_ps(lane, acc);
  for (size_t i = n8; i < dim; ++i) lane[i % 8] = std::fma(a[i], b[i], lane[i % 8]);
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// Four of those reductions at once for dot products without a tail (dim a multiple of 8): lane i
// of the result is ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7)) of the i-th argument's lanes
// v, the same adds in the same order (hadd adds adjacent lanes exactly as the scalar adds do).
[[gnu::always_inline]] inline __m128 finish_dots4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// N dot products without a tail, sums[i] holding the 8 partial sums of product i: *out[i] =
// scale * its reduction, or nothing where out[i] is null. Four at a time through finish_dots4
// (the per-product store-and-add of finish_dot cost about as much as the products of a 128-float
// head), the rest one by one.
template <size_t N>
[[gnu::always_inline]] inline void finish_dots(const __m256 (&sums)[N], float* const (&out)[N],
                                               float scale) {
  size_t i = 0;
#pragma GCC unroll 8
  for (; i + 4 <= N; i += 4) {
    alignas(16) float lane[4];
    _mm_store_ps(lane, _mm_mul_ps(_mm_set1_ps(scale),
                                  finish_dots4(sums[i], sums[i + 1], sums[i + 2], sums[i + 3])));
#pragma GCC unroll 4
    for (size_t j = 0; j < 4; ++j) {
      if (out[i + j] != nullptr) *out[i + j] = lane[j];
    }
  }
#pragma GCC unroll 4
  for (; i < N; ++i) {
    if (out[i] != nullptr) *out[i] = scale * finish_dot(sums[i], nullptr, nullptr, 0, 0);
  }
}

// Heads [0, H) x column blocks [0, D) (Vec::kWidth floats each) at column d0, over all rows in
// order: one fused multiply-add per element and row, as the scalar reference.
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
  // The callers (softmax, libm's exp) are SSE code: leaving the upper halves dirty made them about
  // 20x slower on a Xeon (the SSE/AVX false-dependency penalty).
  _mm256_zeroupper();
}

// attention_scores_* over head blocks of 8, 4, 2, 1, with the file's Scores::heads<H, P> (H heads
// x P row units per pass, H x P = kChains; all rows of the call).
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
  _mm256_zeroupper();  // as accumulate_all
}

}  // namespace
}  // namespace tandem::kernels::detail
