// The AVX2 IQ4_XS dot kernel of the weight-type table (built with -mavx2 -mfma -mf16c
// -ffp-contract=off; called only when cpu_features() reports them): quant_dot_iq4_xs_tiles.h's
// tiles with the scaled pair sums as madd + add.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {
namespace {

[[gnu::always_inline]] inline __m256i kq_madd_add(__m256i acc, __m256i p, __m256i s) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
}

}  // namespace
}  // namespace tandem::kernels::detail

#include "kernels/cpu/quant_dot_iq4_xs_tiles.h"

namespace tandem::kernels::detail {

void dot_iq4_xs_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride) {
  dot_rows<Iq4XsTiles>(w, row_bytes, rows, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
