// The AVX-512 VNNI dot kernels of the grid i-quants (built with the AVX-512 flags plus
// -mavx512vnni; called only when cpu_features() reports AVX-512 F/BW/VL and VNNI):
// quant_dot_iquants_tiles.h's templates with the scaled pair sums as one vpdpwssd (the exact int32
// sum madd + add gives), on the same 256-bit lanes.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {
namespace {

[[gnu::always_inline]] inline __m256i kq_madd_add(__m256i acc, __m256i p, __m256i s) {
  return _mm256_dpwssd_epi32(acc, p, s);
}

// The many-token passes: 16 rows in the lanes of vpdpbusd (quant_dot_iquants_lanes16.h).
struct IqIsa {
  static constexpr bool kRowLanes = true;
};

}  // namespace
}  // namespace tandem::kernels::detail

#include "kernels/cpu/quant_dot_kquants_tiles.h"
// The kquants walk first: the i-quant tiles use its helpers.
#include "kernels/cpu/quant_dot_iquants_tiles.h"
// After the tiles: it defines their iq_lanes_rows.
#include "kernels/cpu/quant_dot_iquants_lanes16.h"

namespace tandem::kernels::detail {

void dot_iq2_xxs_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows,
                             const ActivationRows& x, float* y, size_t y_stride) {
  iq_dot<Iq2XxsRows>(w, row_bytes, rows, x, y, y_stride);
}

void dot_iq2_xs_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows,
                            const ActivationRows& x, float* y, size_t y_stride) {
  iq_dot<Iq2XsRows>(w, row_bytes, rows, x, y, y_stride);
}

void dot_iq2_s_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                           float* y, size_t y_stride) {
  iq_dot<Iq2SRows>(w, row_bytes, rows, x, y, y_stride);
}

void dot_iq3_xxs_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows,
                             const ActivationRows& x, float* y, size_t y_stride) {
  iq_dot<Iq3XxsRows>(w, row_bytes, rows, x, y, y_stride);
}

void dot_iq3_s_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                           float* y, size_t y_stride) {
  iq_dot<Iq3SRows>(w, row_bytes, rows, x, y, y_stride);
}

void dot_iq1_s_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                           float* y, size_t y_stride) {
  iq_dot<Iq1SRows>(w, row_bytes, rows, x, y, y_stride);
}

void dot_iq1_m_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                           float* y, size_t y_stride) {
  iq_dot<Iq1MRows>(w, row_bytes, rows, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
