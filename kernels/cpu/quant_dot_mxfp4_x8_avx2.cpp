// AVX2 (+FMA +F16C) dot product of MXFP4 weights in the interleaved x8 layout (quant_dot.h) with
// Q8_0 activations, bit-identical to the scalar reference dot_mxfp4_scalar on the plain rows: the
// kernels of quant_dot_mxfp4_x8_tiles.h with maddubs block sums.
//
// Built with -mavx2 -mfma -mf16c -ffp-contract=off but linked into binaries that run on any x86-64:
// everything except the exported function has internal linkage.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot_mxfp4_x8_tiles.h"
#include "kernels/cpu/simd_chain.h"

namespace tandem::kernels::detail {
namespace {

struct Avx2Isa {
  // The tiles of up to 4 tokens prefetch this far ahead (prefetch_ahead.h), as the AVX2 K-quant
  // x8 tiles: the hardware prefetchers alone leave a first-generation Zen EPYC short of its rate.
  static constexpr size_t kPrefetchAhead = 2048;
  // Lane i: row i's sum of u * x over the block, for one token's block quants xb. maddubs'
  // 2-element sums are at most 2 * 24 * 128 = 6144 in magnitude (no saturation); four of them added
  // in int16 stay within 24576; madd with ones widens each lane's two int16 to one int32.
  [[gnu::always_inline]] static __m256i block_sums(const Unpacked& w, const int8_t* xb) {
    __m256i lo = _mm256_maddubs_epi16(w.lo[0], broadcast4(xb));
    __m256i hi = _mm256_maddubs_epi16(w.hi[0], broadcast4(xb + 16));
#pragma GCC unroll 4
    for (int k = 1; k < 4; ++k) {
      lo = chain_barrier(
          _mm256_add_epi16(lo, _mm256_maddubs_epi16(w.lo[k], broadcast4(xb + 4 * k))));
      hi = chain_barrier(
          _mm256_add_epi16(hi, _mm256_maddubs_epi16(w.hi[k], broadcast4(xb + 16 + 4 * k))));
    }
    const __m256i ones = _mm256_set1_epi16(1);
    return _mm256_add_epi32(_mm256_madd_epi16(lo, ones), _mm256_madd_epi16(hi, ones));
  }
};

}  // namespace

void dot_mxfp4_x8_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                       const ActivationRows& x, float* y, size_t y_stride) {
  dot_mxfp4_x8<Avx2Isa>(groups, row_begin, row_end, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
