// AVX-512 VNNI dot product of MXFP4 weights in the interleaved x8 layout (quant_dot.h) with Q8_0
// activations, bit-identical to the scalar reference dot_mxfp4_scalar on the plain rows: the
// kernels of quant_dot_mxfp4_x8_tiles.h with vpdpbusd block sums (8 per token and block, against
// AVX2's 8 maddubs + 7 adds + 2 madds); from 4 tokens on, two groups per 512-bit register
// (quant_dot_mxfp4_x8_pairs_avx512.h).
//
// Built with the AVX-512 flags plus -mavx512vnni but linked into binaries that run on any x86-64:
// everything except the exported function has internal linkage.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot_mxfp4_x8_tiles.h"
// After the tiles: the pair tile uses their constants and token tiles.
#include "kernels/cpu/quant_dot_mxfp4_x8_pairs_avx512.h"

namespace tandem::kernels::detail {
namespace {

struct VnniIsa {
  // No software prefetch: on a Zen 4 the hardware prefetchers alone stream these tiles fastest
  // (quant_dot_x8_walk.h).
  static constexpr size_t kPrefetchAhead = 0;
  // Lane i: row i's sum of u * x over the block, accumulated exactly in int32 (u <= 24, |x| <=
  // 128: no saturation is possible), in two chains for the latency.
  [[gnu::always_inline]] static __m256i block_sums(const Unpacked& w, const int8_t* xb) {
    __m256i lo = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w.lo[0], broadcast4(xb));
    __m256i hi = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w.hi[0], broadcast4(xb + 16));
#pragma GCC unroll 4
    for (int k = 1; k < 4; ++k) {
      lo = _mm256_dpbusd_epi32(lo, w.lo[k], broadcast4(xb + 4 * k));
      hi = _mm256_dpbusd_epi32(hi, w.hi[k], broadcast4(xb + 16 + 4 * k));
    }
    return _mm256_add_epi32(lo, hi);
  }
};

}  // namespace

void dot_mxfp4_x8_avx512_vnni(const uint8_t* groups, size_t row_begin, size_t row_end,
                              const ActivationRows& x, float* y, size_t y_stride) {
  const NarrowDotFn narrow = [](const uint8_t* g, size_t begin, size_t end,
                                const ActivationRows& rows, float* out, size_t stride) {
    dot_mxfp4_x8<VnniIsa>(g, begin, end, rows, out, stride);
  };
  if (x.n_tokens < kPairMinTokens || row_begin >= row_end) {
    narrow(groups, row_begin, row_end, x, y, y_stride);
    return;
  }
  const size_t blocks = x.cols / kBlock;
  BiasSums bias_sums(x);
  x8_pairs_walk(Mxfp4PairKernel{groups, blocks * kBlockBytes, blocks, &x, bias_sums.data()}, groups,
                row_begin, row_end, x, y, y_stride, narrow);
}

}  // namespace tandem::kernels::detail
