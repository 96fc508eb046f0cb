// F16C variants of kv_type.h's fp16 conversions (vcvtps2ph with round to nearest even, vcvtph2ps),
// eight elements at a time, the tail through the scalar reference. Built with -mavx -mf16c; nothing
// here is inline or shared with other files, so no F16C code reaches a caller on another CPU.
#include <immintrin.h>

#include "kernels/cpu/kv_type.h"

namespace tandem::kernels::detail {

void fp32_to_fp16_f16c(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  // The scalar tail and the callers (the caches' writes, the attention driver and libm around it)
  // are SSE code: they must not pay the AVX-SSE transition penalty.
  _mm256_zeroupper();
  fp32_to_fp16_scalar(src + i, dst + i, n - i);
}

void fp16_to_fp32_f16c(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  _mm256_zeroupper();  // as above
  fp16_to_fp32_scalar(src + i, dst + i, n - i);
}

}  // namespace tandem::kernels::detail
