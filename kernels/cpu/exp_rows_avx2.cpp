// AVX2 variants of the exp row kernels (exp_rows.h), bit-identical to the scalar ones: 8 float
// lanes of exp_lanes.h's operations, masked loads and stores for a row's last partial block (the
// lanes past its end are zeroed before they reach a sum). softmax takes 16 elements per step, two
// registers, and keeps its 16 double partial sums in four (lanes 0-3, 4-7, 8-11, 12-15).
// Built with -mavx2 -mfma -mf16c -ffp-contract=off: nothing here is inline or shared with other
// files, and every entry point ends with vzeroupper (the callers may be SSE code).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <limits>

#include "kernels/cpu/exp_rows.h"

namespace tandem::kernels::detail {
namespace {

struct Lanes {
  using F = __m256;
  using I = __m256i;
  static F set1(float f) { return _mm256_set1_ps(f); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F min(F a, F b) { return _mm256_min_ps(a, b); }
  static I bits(F f) { return _mm256_castps_si256(f); }
  static F from_bits(I i) { return _mm256_castsi256_ps(i); }
  static I set1_i(int32_t i) { return _mm256_set1_epi32(i); }
  static I add_i(I a, I b) { return _mm256_add_epi32(a, b); }
  static I sub_i(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I half_i(I a) { return _mm256_srai_epi32(a, 1); }
  static I exponent_i(I a) { return _mm256_slli_epi32(a, 23); }
};

}  // namespace
}  // namespace tandem::kernels::detail

#include "kernels/cpu/exp_lanes.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kW = 8;

// All-ones in lanes [0, n) of a block (n >= 8: all, n <= 0: none; |n| < 2^31), for maskload and
// maskstore.
__m256i head_mask(std::ptrdiff_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Adds the 8 floats of e to the double lanes a (e's lanes 0-3) and b (4-7).
void add_wide(__m256 e, __m256d& a, __m256d& b) {
  a = _mm256_add_pd(a, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
  b = _mm256_add_pd(b, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
}

}  // namespace

void exp_row_avx2(const float* x, size_t n, float* out) {
  size_t i = 0;
  for (; i + kW <= n; i += kW) _mm256_storeu_ps(out + i, exp_lanes<Lanes>(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = head_mask(static_cast<std::ptrdiff_t>(n - i));
    _mm256_maskstore_ps(out + i, m, exp_lanes<Lanes>(_mm256_maskload_ps(x + i, m)));
  }
  _mm256_zeroupper();
}

void softmax_avx2(float* row, size_t n, const float* sink) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const __m256 vneg_inf = _mm256_set1_ps(neg_inf);
  __m256 vmax = vneg_inf;
  size_t i = 0;
  for (; i + kW <= n; i += kW) vmax = _mm256_max_ps(_mm256_loadu_ps(row + i), vmax);
  if (i < n) {
    const __m256i m = head_mask(static_cast<std::ptrdiff_t>(n - i));
    const __m256 x =
        _mm256_blendv_ps(vneg_inf, _mm256_maskload_ps(row + i, m), _mm256_castsi256_ps(m));
    vmax = _mm256_max_ps(x, vmax);
  }
  float max = sink != nullptr ? *sink : neg_inf;
  alignas(32) float lanes[kW];
  _mm256_store_ps(lanes, vmax);
  for (const float v : lanes) max = v > max ? v : max;

  const __m256 vm = _mm256_set1_ps(max);
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                    _mm256_setzero_pd()};
  for (i = 0; i + 2 * kW <= n; i += 2 * kW) {
    const __m256 e0 = exp_lanes<Lanes>(_mm256_sub_ps(_mm256_loadu_ps(row + i), vm));
    const __m256 e1 = exp_lanes<Lanes>(_mm256_sub_ps(_mm256_loadu_ps(row + i + kW), vm));
    _mm256_storeu_ps(row + i, e0);
    _mm256_storeu_ps(row + i + kW, e1);
    add_wide(e0, acc[0], acc[1]);
    add_wide(e1, acc[2], acc[3]);
  }
  if (i < n) {
    // The last 1-15 elements: lanes 0-7 then 8-15 of one 16-lane step.
    for (size_t half = 0; half < 2; ++half) {
      const size_t at = i + half * kW;
      const __m256i m = head_mask(static_cast<std::ptrdiff_t>(n) - static_cast<std::ptrdiff_t>(at));
      const __m256 x = _mm256_maskload_ps(row + at, m);
      const __m256 e =
          _mm256_and_ps(exp_lanes<Lanes>(_mm256_sub_ps(x, vm)), _mm256_castsi256_ps(m));
      _mm256_maskstore_ps(row + at, m, e);
      add_wide(e, acc[2 * half], acc[2 * half + 1]);
    }
  }
  // Lane l + 8, then + 4, + 2, + 1 (exp_rows.h).
  const __m256d s4 = _mm256_add_pd(_mm256_add_pd(acc[0], acc[2]), _mm256_add_pd(acc[1], acc[3]));
  const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
  double sum = _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
  if (sink != nullptr) sum += _mm256_cvtss_f32(exp_lanes<Lanes>(_mm256_set1_ps(*sink - max)));
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / sum));
  for (i = 0; i + kW <= n; i += kW) {
    _mm256_storeu_ps(row + i, _mm256_mul_ps(_mm256_loadu_ps(row + i), inv));
  }
  if (i < n) {
    const __m256i m = head_mask(static_cast<std::ptrdiff_t>(n - i));
    _mm256_maskstore_ps(row + i, m, _mm256_mul_ps(_mm256_maskload_ps(row + i, m), inv));
  }
  _mm256_zeroupper();
}

void sigmoid_avx2(const float* x, size_t n, float* out) {
  size_t i = 0;
  for (; i + kW <= n; i += kW) {
    _mm256_storeu_ps(out + i, sigmoid_lanes<Lanes>(_mm256_loadu_ps(x + i)));
  }
  if (i < n) {
    const __m256i m = head_mask(static_cast<std::ptrdiff_t>(n - i));
    _mm256_maskstore_ps(out + i, m, sigmoid_lanes<Lanes>(_mm256_maskload_ps(x + i, m)));
  }
  _mm256_zeroupper();
}

void silu_mul_avx2(const float* gate, const float* up, size_t n, float* out) {
  size_t i = 0;
  for (; i + kW <= n; i += kW) {
    _mm256_storeu_ps(out + i,
                     silu_mul_lanes<Lanes>(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  }
  if (i < n) {
    const __m256i m = head_mask(static_cast<std::ptrdiff_t>(n - i));
    _mm256_maskstore_ps(
        out + i, m,
        silu_mul_lanes<Lanes>(_mm256_maskload_ps(gate + i, m), _mm256_maskload_ps(up + i, m)));
  }
  _mm256_zeroupper();
}

void swiglu_oai_avx2(const float* gate, const float* up, size_t n, float alpha, float limit,
                     float* out) {
  size_t i = 0;
  for (; i + kW <= n; i += kW) {
    _mm256_storeu_ps(out + i, swiglu_oai_lanes<Lanes>(_mm256_loadu_ps(gate + i),
                                                      _mm256_loadu_ps(up + i), alpha, limit));
  }
  if (i < n) {
    const __m256i m = head_mask(static_cast<std::ptrdiff_t>(n - i));
    _mm256_maskstore_ps(out + i, m,
                        swiglu_oai_lanes<Lanes>(_mm256_maskload_ps(gate + i, m),
                                                _mm256_maskload_ps(up + i, m), alpha, limit));
  }
  _mm256_zeroupper();
}

}  // namespace tandem::kernels::detail
