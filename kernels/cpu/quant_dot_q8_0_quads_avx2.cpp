// AVX2 (+F16C) dot products of Q8_0 weights in the row-quad interleave (quant_dot.h,
// WeightLayout::kRowQuads8) with Q8_0 activations, bit-identical to the plain scalar reference
// (quant_dot_legacy_scalar.cpp); the tiles and walk are quant_dot_q8_0_quads_walk.h's.
//
// Built with -mavx2 -mfma -mf16c -ffp-contract=off but linked into binaries that run on any x86-64:
// everything except the exported function has internal linkage (the included helpers too), so no
// AVX2 code can be picked by the linker for a caller on another CPU.
//
// A quad's four products: maddubs (|w| times the broadcast with w's sign; |q| <= 128 and
// |x| <= 127, so the pair sums <= 2 * 128 * 127 never saturate), widened to int32 by madd with
// ones. The block interleave's 8-row tiles
// (quant_dot_legacy_avx2.cpp) assemble each row pair with an insert and reduce across lanes with
// three hadds per block and token; on a third-generation Zen EPYC this form runs 1.76x / 1.47x /
// 1.25x / 1.3x / 1.15x faster with 1 / 2 / 3 / 4 / 8 tokens (docs/benchmarks.md).
#include <immintrin.h>

#include <cstddef>

#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/simd_chain.h"

namespace tandem::kernels::detail {
namespace {

struct Isa {
  static constexpr bool kPrefetch = true;
  static constexpr bool kBiased = false;
  // |w|, for maddubs's unsigned operand.
  [[gnu::always_inline]] static __m256i prepare(__m256i w) { return _mm256_abs_epi8(w); }
  [[gnu::always_inline]] static __m256i add_quad(__m256i isum, __m256i magnitude, __m256i w,
                                                 __m256i x, size_t k) {
    const __m256i quad = _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(x, w)),
                                           _mm256_set1_epi16(1));
    // In program order (simd_chain.h): reassociated into a tree, the 4-token tile computed all 32
    // quad sums of a block first and spilled them (llvm-mca, Zen 3: 50.6 -> 48.1 cycles a block).
    return k == 0 ? quad : chain_barrier(_mm256_add_epi32(isum, quad));
  }
};

}  // namespace
}  // namespace tandem::kernels::detail

#include "kernels/cpu/quant_dot_q8_0_quads_walk.h"

namespace tandem::kernels::detail {

void dot_q8_0_quads_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                         const ActivationRows& x, float* y, size_t y_stride) {
  quads_dot(groups, row_begin, row_end, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
