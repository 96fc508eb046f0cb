// AVX-512 VNNI (+VL, 256-bit lanes) dot products of Q8_0 weights in the row-quad interleave
// (quant_dot.h, WeightLayout::kRowQuads8) with Q8_0 activations, bit-identical to the plain scalar
// reference (quant_dot_legacy_scalar.cpp); the tiles and walk are quant_dot_q8_0_quads_walk.h's.
// A quad's four products are one vpdpbusd of w + 128 (unsigned bytes, made once per quad for
// every token) and the token's broadcast into the running sum, and 128 * (the token's block sum of
// quants, once per call) comes off after the eight quads: every sum exact (|sum| <= 32 * 255 *
// 127 + 128 * 32 * 127), no saturation, no widening step: two instructions per quad and token (the
// broadcast and the vpdpbusd) against the AVX2 form's five. A group's first tile prefetches 2 KiB
// ahead as the AVX2 one does (streaming 256 MiB with 4 tokens on one Zen 4 thread: 17.4-17.7 GB/s
// with it, 12.4-13.1 without, in a noisy host's runs).
//
// Built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -ffp-contract=off; only the exported
// function has external linkage.
#include <immintrin.h>

#include <cstddef>

#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/simd_chain.h"

namespace tandem::kernels::detail {
namespace {

struct Isa {
  static constexpr bool kPrefetch = true;
  static constexpr bool kBiased = true;
  // w + 128 (0 .. 255), vpdpbusd's unsigned operand.
  [[gnu::always_inline]] static __m256i prepare(__m256i w) {
    return _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80)));
  }
  [[gnu::always_inline]] static __m256i add_quad(__m256i isum, __m256i biased, __m256i, __m256i x,
                                                 size_t) {
    return chain_barrier(_mm256_dpbusd_epi32(isum, biased, x));
  }
};

}  // namespace
}  // namespace tandem::kernels::detail

#include "kernels/cpu/quant_dot_q8_0_quads_walk.h"

namespace tandem::kernels::detail {

void dot_q8_0_quads_avx512_vnni(const uint8_t* groups, size_t row_begin, size_t row_end,
                                const ActivationRows& x, float* y, size_t y_stride) {
  quads_dot(groups, row_begin, row_end, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
