// AVX-512 VNNI (+F/BW/VL, 256-bit lanes) dot products of Q4_K and Q5_K weights in their interleaved
// x8 layouts with Q8_K activations (quant_dot_q45_k_x8_tiles.h): one vpdpbusd per four quants of a
// sub-block for all eight rows, scaled by vpmulld. Built with -mavx512f -mavx512bw -mavx512vl
// -mavx512vnni -ffp-contract=off; only the exported functions have external linkage.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {
namespace {

// vpdpbusd sums four products per int32 lane: any number of steps a tile takes is exact.
struct Q45KX8Isa {
  // No software prefetch: on a Zen 4 the hardware prefetchers alone stream these tiles fastest
  // (quant_dot_x8_walk.h).
  static constexpr size_t kPrefetchAhead = 0;
  template <int kQuantMax>
  static constexpr int exact_steps() {
    return 1 << 16;
  }
  static __m256i scale_vector(__m256i s32) { return s32; }
  static __m256i step(__m256i acc, __m256i w, __m256i x) { return _mm256_dpbusd_epi32(acc, w, x); }
  static __m256i merge(__m256i a, __m256i b) { return _mm256_add_epi32(a, b); }
  static __m256i finish(__m256i isum, __m256i acc, __m256i scale) {
    return _mm256_add_epi32(isum, _mm256_mullo_epi32(acc, scale));
  }
};

}  // namespace
}  // namespace tandem::kernels::detail

#include "kernels/cpu/quant_dot_q45_k_x8_lanes.h"
#include "kernels/cpu/quant_dot_q45_k_x8_pairs_avx512.h"
#include "kernels/cpu/quant_dot_x8_lanes_avx512.h"

namespace tandem::kernels::detail {

void dot_q4_k_x8_avx512_vnni(const uint8_t* groups, size_t row_begin, size_t row_end,
                             const ActivationRows& x, float* y, size_t y_stride) {
  if (x.n_tokens >= LanesAvx512::kMinTokens) {
    x8_lanes_dot<LanesAvx512, Q45KLanes<Q4KX8Format>>(groups, row_begin, row_end, x, y, y_stride,
                                                      dot_q4_k_x8, dot_q4_k_x8_avx512_vnni);
    return;
  }
  x8_pairs_dot<Q45KPairTile<Q4KX8Format>>(groups, Q4KX8Format::kBlockBytes, row_begin, row_end, x,
                                          y, y_stride, dot_q4_k_x8);
}

void dot_q5_k_x8_avx512_vnni(const uint8_t* groups, size_t row_begin, size_t row_end,
                             const ActivationRows& x, float* y, size_t y_stride) {
  if (x.n_tokens >= LanesAvx512::kMinTokens) {
    x8_lanes_dot<LanesAvx512, Q45KLanes<Q5KX8Format>>(groups, row_begin, row_end, x, y, y_stride,
                                                      dot_q5_k_x8, dot_q5_k_x8_avx512_vnni);
    return;
  }
  x8_pairs_dot<Q45KPairTile<Q5KX8Format>>(groups, Q5KX8Format::kBlockBytes, row_begin, row_end, x,
                                          y, y_stride, dot_q5_k_x8);
}

}  // namespace tandem::kernels::detail
