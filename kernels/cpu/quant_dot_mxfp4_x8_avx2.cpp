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
    return sums_of(w, [xb](int i) { return broadcast4(xb + 4 * i); });
  }
  // The same from the block's expanded quants xe (quant_dot_x8_walk.h): calls of up to
  // kExpandTokens tokens load them instead of broadcasting. One Zen 1 thread, streaming 256 MiB:
  // one token 26.9-28.7 -> 30.4-30.6 GFLOP/s, two 34.3-34.8 -> 37.5-41.2; gpt-oss-shaped model
  // decode 20.6-21.2 -> 21.8-22.3 tok/s with 2 threads, 12.2 -> 12.6-12.9 with one.
  static constexpr size_t kExpandTokens = 3;
  [[gnu::always_inline]] static __m256i expanded_block_sums(const Unpacked& w, const int8_t* xe) {
    return sums_of(w, [xe](int i) {
      return _mm256_load_si256(reinterpret_cast<const __m256i*>(xe + 32 * i));
    });
  }
  // The sums with quad(i) = the block's quants 4i .. 4i+3 in every lane.
  template <class Quad>
  [[gnu::always_inline]] static __m256i sums_of(const Unpacked& w, const Quad& quad) {
    __m256i lo = _mm256_maddubs_epi16(w.lo[0], quad(0));
    __m256i hi = _mm256_maddubs_epi16(w.hi[0], quad(4));
#pragma GCC unroll 4
    for (int k = 1; k < 4; ++k) {
      lo = chain_barrier(_mm256_add_epi16(lo, _mm256_maddubs_epi16(w.lo[k], quad(k))));
      hi = chain_barrier(_mm256_add_epi16(hi, _mm256_maddubs_epi16(w.hi[k], quad(4 + k))));
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
