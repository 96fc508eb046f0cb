// AVX2 (+F16C) activation quantizers (activation_quantize.h), bit-identical to the scalar
// references: the same float operations lane by lane (one multiply, then the reference's rounding:
// round-half-away for Q8_0, ties-to-even for Q8_K), the reference's choices for NaN, infinities
// and all-zero blocks, and exact integer sums.
//
// Built with -mavx2 -mfma -mf16c -ffp-contract=off but linked into binaries that run on any
// x86-64: everything except the exported functions is in the anonymous namespace, and nothing
// inline or templated is shared with other files.
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/activation_quantize.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kQ8_0Block = 32;
constexpr size_t kQ8_KBlock = 256;
constexpr size_t kQ8_KSum = 16;

// |v| lane-wise.
[[gnu::always_inline]] inline __m256 abs_ps(__m256 v) {
  return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

// The largest lane of v.
[[gnu::always_inline]] inline float max_lane(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// The largest |x[i]| over n elements (a multiple of 8), NaNs ignored as std::fmax and the
// reference's `>` comparison ignore them: max_ps returns its second operand when the first is NaN.
float amax_of(const float* x, size_t n) {
  __m256 m = _mm256_setzero_ps();
  for (size_t i = 0; i < n; i += 8) m = _mm256_max_ps(abs_ps(_mm256_loadu_ps(x + i)), m);
  return max_lane(m);
}

// Four vectors of 8 int32 (each in -128..127) to 32 int8 in element order.
[[gnu::always_inline]] inline __m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b);  // a0-3 b0-3 | a4-7 b4-7
  const __m256i cd = _mm256_packs_epi32(c, d);
  const __m256i bytes = _mm256_packs_epi16(ab, cd);  // a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// round-half-away-from-zero(v) (std::round), exactly: t = trunc(v), and v - t (exact) decides.
[[gnu::always_inline]] inline __m256 round_away(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 half = _mm256_cmp_ps(abs_ps(_mm256_sub_ps(v, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
  return _mm256_add_ps(t, _mm256_and_ps(half, one));
}

}  // namespace

void quantize_row_q8_0_avx2(const float* x, size_t cols, int8_t* qs, float* d) {
  for (size_t b = 0; b < cols / kQ8_0Block; ++b) {
    const float* src = x + b * kQ8_0Block;
    const float amax = amax_of(src, kQ8_0Block);
    const float scale = amax / 127.0f;
    const float id = scale != 0.0f ? 1.0f / scale : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) {
      const __m256 r = round_away(_mm256_mul_ps(_mm256_loadu_ps(src + 8 * i), vid));
      // NaN (from a NaN input, or an infinite one times 0) becomes 0; the rest is clamped.
      const __m256 ordered = _mm256_cmp_ps(r, r, _CMP_ORD_Q);
      const __m256 c =
          _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
      q[i] = _mm256_cvtps_epi32(_mm256_and_ps(c, ordered));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + b * kQ8_0Block),
                        pack32(q[0], q[1], q[2], q[3]));
    // The scale through fp16 and back (round to nearest even, as the reference's conversion).
    const __m128i h =
        _mm_cvtps_ph(_mm_set_ss(scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    d[b] = _mm_cvtss_f32(_mm_cvtph_ps(h));
  }
}

void quantize_row_q8_k_avx2(const float* x, size_t cols, int8_t* qs, float* d, int16_t* bsums) {
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  for (size_t b = 0; b < cols / kQ8_KBlock; ++b) {
    const float* src = x + b * kQ8_KBlock;
    int8_t* q = qs + b * kQ8_KBlock;
    int16_t* sums = bsums + b * (kQ8_KBlock / kQ8_KSum);
    const float amax = amax_of(src, kQ8_KBlock);
    if (amax == 0.0f || !std::isfinite(amax)) {
      std::memset(q, 0, kQ8_KBlock);
      std::memset(sums, 0, kQ8_KBlock / kQ8_KSum * sizeof(int16_t));
      d[b] = 0.0f;
      continue;
    }
    // The reference keeps the first element whose magnitude is amax (its sign decides iscale's).
    float max = amax;
    const __m256 target = _mm256_set1_ps(amax);
    for (size_t i = 0; i < kQ8_KBlock; i += 8) {
      const __m256 v = _mm256_loadu_ps(src + i);
      const int mask = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(v), target, _CMP_EQ_OQ));
      if (mask != 0) {
        max = src[i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 vs = _mm256_set1_ps(iscale);
    for (size_t i = 0; i < kQ8_KBlock; i += 32) {
      __m256i v[4];
      for (int k = 0; k < 4; ++k) {
        const __m256 r = _mm256_round_ps(
            _mm256_mul_ps(vs, _mm256_loadu_ps(src + i + 8 * static_cast<size_t>(k))),
            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        // A NaN element (beside a finite largest one) becomes 0, as in the reference.
        const __m256 ordered = _mm256_cmp_ps(r, r, _CMP_ORD_Q);
        const __m256 c =
            _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-128.0f)), _mm256_set1_ps(127.0f));
        v[k] = _mm256_cvtps_epi32(_mm256_and_ps(c, ordered));
      }
      const __m256i bytes = pack32(v[0], v[1], v[2], v[3]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), bytes);
      // The two 16-quant sums of these 32: pair sums (ones x quants), then to int32 and across.
      const __m256i s4 = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, bytes), ones16);
      __m256i s = _mm256_hadd_epi32(s4, s4);
      s = _mm256_hadd_epi32(s, s);
      sums[i / kQ8_KSum] = static_cast<int16_t>(_mm256_extract_epi32(s, 0));
      sums[i / kQ8_KSum + 1] = static_cast<int16_t>(_mm256_extract_epi32(s, 4));
    }
    d[b] = 1.0f / iscale;
  }
}

}  // namespace tandem::kernels::detail
