// The AVX2 dot kernels of the grid i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S)
// with Q8_K activations (built with -mavx2 -mfma -mf16c -ffp-contract=off; called only when
// cpu_features() reports them): quant_dot_iquants_tiles.h's templates with the scaled pair sums
// as madd + add (in program order: simd_chain.h).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/simd_chain.h"

namespace tandem::kernels::detail {
namespace {

[[gnu::always_inline]] inline __m256i kq_madd_add(__m256i acc, __m256i p, __m256i s) {
  return chain_barrier(_mm256_add_epi32(acc, _mm256_madd_epi16(p, s)));
}

// The many-token passes: the pair sums (a row-lane form would need maddubs + madd per 4 elements
// and 8 rows per register); from 16 tokens the tokens in the lanes (quant_dot_iquants_lanes.h),
// which decode each super-block once per call instead of once per tile: on a Zen 4 thread IQ2_XXS
// went from 87 / 105 / 108 to 119 / 164 / 175 GFLOP/s at 16 / 64 / 128 tokens. (AVX-512 VNNI keeps
// its 16-row passes, which also decode once per call: there the lanes gained 5 % from 64 tokens and
// lost below.)
struct IqIsa {
  static constexpr bool kRowLanes = false;
};

}  // namespace
}  // namespace tandem::kernels::detail

#include "kernels/cpu/quant_dot_kquants_tiles.h"
// The kquants walk first: the i-quant tiles use its helpers.
#include "kernels/cpu/quant_dot_iquants_tiles.h"
// After the tiles: the lanes decode with their Rows types.
#include "kernels/cpu/quant_dot_iquants_lanes.h"
#include "kernels/cpu/quant_dot_x8_lanes_avx2.h"

namespace tandem::kernels::detail {

void dot_iq2_xxs_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                      float* y, size_t y_stride) {
  iq_lanes_dot<LanesAvx2, Iq2XxsRows>(w, row_bytes, rows, x, y, y_stride);
}

void dot_iq2_xs_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride) {
  iq_lanes_dot<LanesAvx2, Iq2XsRows>(w, row_bytes, rows, x, y, y_stride);
}

void dot_iq2_s_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                    float* y, size_t y_stride) {
  iq_lanes_dot<LanesAvx2, Iq2SRows>(w, row_bytes, rows, x, y, y_stride);
}

void dot_iq3_xxs_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                      float* y, size_t y_stride) {
  iq_lanes_dot<LanesAvx2, Iq3XxsRows>(w, row_bytes, rows, x, y, y_stride);
}

void dot_iq3_s_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                    float* y, size_t y_stride) {
  iq_lanes_dot<LanesAvx2, Iq3SRows>(w, row_bytes, rows, x, y, y_stride);
}

void dot_iq1_s_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                    float* y, size_t y_stride) {
  iq_lanes_dot<LanesAvx2, Iq1SRows>(w, row_bytes, rows, x, y, y_stride);
}

void dot_iq1_m_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                    float* y, size_t y_stride) {
  iq_lanes_dot<LanesAvx2, Iq1MRows>(w, row_bytes, rows, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
