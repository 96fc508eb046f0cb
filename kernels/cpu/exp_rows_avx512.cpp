// AVX-512 (F) variants of the exp row kernels (exp_rows.h), bit-identical to the scalar ones: 16
// float lanes of exp_lanes.h's operations, masked loads and stores for a row's last partial block
// (the lanes past its end are zeroed before they reach a sum). softmax's 16 double partial sums
// are two registers (lanes 0-7 and 8-15).
// Built with the AVX-512 flags: nothing here is inline or shared with other files, and every entry
// point ends with vzeroupper (the callers may be SSE code).
#include <immintrin.h>

#include <cstdint>
#include <limits>

#include "kernels/cpu/exp_rows.h"

namespace tandem::kernels::detail {
namespace {

struct Lanes {
  using F = __m512;
  using I = __m512i;
  static F set1(float f) { return _mm512_set1_ps(f); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F min(F a, F b) { return _mm512_min_ps(a, b); }
  static I bits(F f) { return _mm512_castps_si512(f); }
  static F from_bits(I i) { return _mm512_castsi512_ps(i); }
  static I set1_i(int32_t i) { return _mm512_set1_epi32(i); }
  static I add_i(I a, I b) { return _mm512_add_epi32(a, b); }
  static I sub_i(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I half_i(I a) { return _mm512_srai_epi32(a, 1); }
  static I exponent_i(I a) { return _mm512_slli_epi32(a, 23); }
};

}  // namespace
}  // namespace tandem::kernels::detail

#include "kernels/cpu/exp_lanes.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kW = 16;

// Lanes [0, n) of a block, n < 16.
__mmask16 head_mask(size_t n) {
  return static_cast<__mmask16>((1u << n) - 1u);
}

__m256d upper_half(__m512d v) {
  return _mm512_extractf64x4_pd(v, 1);
}

}  // namespace

void exp_row_avx512(const float* x, size_t n, float* out) {
  size_t i = 0;
  for (; i + kW <= n; i += kW) _mm512_storeu_ps(out + i, exp_lanes<Lanes>(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = head_mask(n - i);
    _mm512_mask_storeu_ps(out + i, m, exp_lanes<Lanes>(_mm512_maskz_loadu_ps(m, x + i)));
  }
  _mm256_zeroupper();
}

void softmax_avx512(float* row, size_t n, const float* sink) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  __m512 vmax = _mm512_set1_ps(neg_inf);
  size_t i = 0;
  for (; i + kW <= n; i += kW) vmax = _mm512_max_ps(_mm512_loadu_ps(row + i), vmax);
  const size_t tail = n - i;
  const __mmask16 tail_mask = head_mask(tail);
  if (tail != 0) vmax = _mm512_max_ps(_mm512_mask_loadu_ps(vmax, tail_mask, row + i), vmax);
  float max = sink != nullptr ? *sink : neg_inf;
  alignas(64) float lanes[kW];
  _mm512_store_ps(lanes, vmax);
  for (const float v : lanes) max = v > max ? v : max;

  const __m512 m = _mm512_set1_ps(max);
  __m512d lo = _mm512_setzero_pd();  // double lanes 0-7
  __m512d hi = _mm512_setzero_pd();  // double lanes 8-15
  for (i = 0; i + kW <= n; i += kW) {
    const __m512 e = exp_lanes<Lanes>(_mm512_sub_ps(_mm512_loadu_ps(row + i), m));
    _mm512_storeu_ps(row + i, e);
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(upper_half(_mm512_castps_pd(e)))));
  }
  if (tail != 0) {
    const __m512 x = _mm512_maskz_loadu_ps(tail_mask, row + i);
    const __m512 e = _mm512_maskz_mov_ps(tail_mask, exp_lanes<Lanes>(_mm512_sub_ps(x, m)));
    _mm512_mask_storeu_ps(row + i, tail_mask, e);
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(upper_half(_mm512_castps_pd(e)))));
  }
  // Lane l + 8, then + 4, + 2, + 1 (exp_rows.h).
  const __m512d s8 = _mm512_add_pd(lo, hi);
  const __m256d s4 = _mm256_add_pd(_mm512_castpd512_pd256(s8), upper_half(s8));
  const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
  double sum = _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
  if (sink != nullptr) {
    sum += _mm512_cvtss_f32(exp_lanes<Lanes>(_mm512_set1_ps(*sink - max)));
  }
  const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / sum));
  for (i = 0; i + kW <= n; i += kW) {
    _mm512_storeu_ps(row + i, _mm512_mul_ps(_mm512_loadu_ps(row + i), inv));
  }
  if (tail != 0) {
    _mm512_mask_storeu_ps(row + i, tail_mask,
                          _mm512_mul_ps(_mm512_maskz_loadu_ps(tail_mask, row + i), inv));
  }
  _mm256_zeroupper();
}

void sigmoid_avx512(const float* x, size_t n, float* out) {
  size_t i = 0;
  for (; i + kW <= n; i += kW) {
    _mm512_storeu_ps(out + i, sigmoid_lanes<Lanes>(_mm512_loadu_ps(x + i)));
  }
  if (i < n) {
    const __mmask16 m = head_mask(n - i);
    _mm512_mask_storeu_ps(out + i, m, sigmoid_lanes<Lanes>(_mm512_maskz_loadu_ps(m, x + i)));
  }
  _mm256_zeroupper();
}

void silu_mul_avx512(const float* gate, const float* up, size_t n, float* out) {
  size_t i = 0;
  for (; i + kW <= n; i += kW) {
    _mm512_storeu_ps(out + i,
                     silu_mul_lanes<Lanes>(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  }
  if (i < n) {
    const __mmask16 m = head_mask(n - i);
    _mm512_mask_storeu_ps(out + i, m,
                          silu_mul_lanes<Lanes>(_mm512_maskz_loadu_ps(m, gate + i),
                                                _mm512_maskz_loadu_ps(m, up + i)));
  }
  _mm256_zeroupper();
}

void swiglu_oai_avx512(const float* gate, const float* up, size_t n, float alpha, float limit,
                       float* out) {
  size_t i = 0;
  for (; i + kW <= n; i += kW) {
    _mm512_storeu_ps(out + i, swiglu_oai_lanes<Lanes>(_mm512_loadu_ps(gate + i),
                                                      _mm512_loadu_ps(up + i), alpha, limit));
  }
  if (i < n) {
    const __mmask16 m = head_mask(n - i);
    _mm512_mask_storeu_ps(out + i, m,
                          swiglu_oai_lanes<Lanes>(_mm512_maskz_loadu_ps(m, gate + i),
                                                  _mm512_maskz_loadu_ps(m, up + i), alpha, limit));
  }
  _mm256_zeroupper();
}

}  // namespace tandem::kernels::detail
