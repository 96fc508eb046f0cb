// AVX2 variants of attention_rows.h, bit-identical to the scalar ones: 8 float lanes hold
// dot_f32's 8 partial sums (lane l sums elements l, l + 8, ...), each step a separate multiply and
// add (-ffp-contract=off; no FMA); the tail and the final reduction are scalar, in dot_f32's order.
// Built with -mavx2 -mfma -mf16c -ffp-contract=off: nothing here is inline or shared with other
// files, so no AVX2 code reaches a caller on another CPU.
#include <immintrin.h>

#include "kernels/cpu/attention_rows.h"

namespace tandem::kernels::detail {

void attention_scores_avx2(const float* q, size_t n_heads, const float* k, size_t dim, float scale,
                           float* scores, size_t stride) {
  const size_t n8 = dim / 8 * 8;
  for (size_t h = 0; h < n_heads; ++h) {
    const float* a = q + h * dim;
    __m256 acc = _mm256_setzero_ps();
    for (size_t i = 0; i < n8; i += 8) {
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(k + i)));
    }
    float lane[8];
    _mm256_storeu_ps(lane, acc);
    for (size_t i = n8; i < dim; ++i) lane[i % 8] += a[i] * k[i];
    const float dot =
        ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    scores[h * stride] = scale * dot;
  }
}

void attention_accumulate_avx2(const float* w, size_t stride, size_t n_heads, const float* v,
                               size_t vdim, float* out) {
  const size_t n8 = vdim / 8 * 8;
  for (size_t h = 0; h < n_heads; ++h) {
    const float wh = w[h * stride];
    const __m256 wv = _mm256_set1_ps(wh);
    float* o = out + h * vdim;
    for (size_t d = 0; d < n8; d += 8) {
      _mm256_storeu_ps(
          o + d, _mm256_add_ps(_mm256_loadu_ps(o + d), _mm256_mul_ps(wv, _mm256_loadu_ps(v + d))));
    }
    for (size_t d = n8; d < vdim; ++d) o[d] += wh * v[d];
  }
}

}  // namespace tandem::kernels::detail
