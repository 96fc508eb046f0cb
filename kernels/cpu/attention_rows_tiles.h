// dot_f32's final reduction for the SIMD attention row kernels (attention_rows.h), shared by
// attention_rows_avx2.cpp and attention_rows_avx512.cpp: one product at a time, or four at once
// through hadd where there is no tail; and the length of their runs of rows. Each file includes it
// under its own -m flags. Everything here has internal linkage (see quant_dot_kquants_tiles.h for
// why).
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstddef>

namespace tandem::kernels::detail {
namespace {

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

// The rows of one pass of the row kernels' walks: as many as fill about 16 KiB of floats (at least
// 8), so that a run's rows stay in L1 while every head block and column tile of the call reads
// them (a 2,048-token prefill's gathered rows of one kv head are 1 MiB, past L2).
inline size_t chunk_rows(size_t width) {
  const size_t rows = width == 0 ? 4096 : 4096 / width;
  return rows < 8 ? 8 : rows;
}

}  // namespace
}  // namespace tandem::kernels::detail
