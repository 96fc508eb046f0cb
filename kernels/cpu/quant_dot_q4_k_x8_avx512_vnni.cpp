// AVX-512 VNNI (+F/BW/VL, 256-bit lanes) dot product of Q4_K weights in the interleaved x8 layout
// with Q8_K activations (quant_dot_q4_k_x8_tiles.h): one vpdpbusd per four quants of a sub-block
// for all eight rows, scaled by vpmulld. Built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni
// -ffp-contract=off; only the exported function has external linkage.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {
namespace {

struct Q4KX8Isa {
  static __m256i scale_vector(__m256i s32) { return s32; }
  static __m256i step(__m256i acc, __m256i w, __m256i x) { return _mm256_dpbusd_epi32(acc, w, x); }
  static __m256i merge(__m256i a, __m256i b) { return _mm256_add_epi32(a, b); }
  static __m256i finish(__m256i isum, __m256i acc, __m256i scale) {
    return _mm256_add_epi32(isum, _mm256_mullo_epi32(acc, scale));
  }
};

}  // namespace
}  // namespace tandem::kernels::detail

#include "kernels/cpu/quant_dot_q4_k_x8_tiles.h"

namespace tandem::kernels::detail {

void dot_q4_k_x8_avx512_vnni(const uint8_t* groups, size_t row_begin, size_t row_end,
                             const ActivationRows& x, float* y, size_t y_stride) {
  dot_q4_k_x8(groups, row_begin, row_end, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
