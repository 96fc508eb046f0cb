// The sum of a __m256's eight float lanes in one fixed order, for the AVX2-and-up kernel files.
// Internal linkage on purpose (as quant_dot_kquants_tiles.h explains): each includer compiles its
// own copy under its own -m flags.
#pragma once

#include <immintrin.h>

namespace tandem::kernels::detail {
namespace {

// (s0 + s2) + (s1 + s3) with s_i = lane_i + lane_(i+4): halves, then pairs, then the last two.
[[maybe_unused]] float avx2_sum_lanes(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace
}  // namespace tandem::kernels::detail
