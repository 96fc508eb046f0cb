// The dot product of Q6_K weights in the interleaved x8 layout (quant_dot.h) with Q8_K activations,
// bit-identical to dot_q6_k_scalar on the plain rows: the walk, the quant unpacking and the float
// combine shared by the ISA files (quant_dot_q6_k_x8_avx2.cpp, quant_dot_q6_k_x8_avx512_vnni.cpp),
// which differ only in how they form a super-block's exact integer sums. Before including this
// header a file defines, in tandem::kernels::detail's anonymous namespace, a struct Q6KX8Isa with
//   template <int T> static void block_sums(const uint8_t* blk, const int8_t* const* xq,
//                                           const int16_t* const* bsums, __m256i* isum):
// for the group super-block at blk and token t's 256 activation quants xq[t] and 16 bsums
// bsums[t], int32 lane i of isum[t] = row i's exact sum over the 16 groups g of
// scale_g * sum((q - 32) * x), the integer part of dot_q6_k_scalar's super-block term; and
//   static constexpr size_t kPrefetchAhead: how far ahead (bytes) the tiles of up to 4 tokens
//   prefetch each block they stream (prefetch_ahead.h; 0: none).
// Everything here has internal linkage (see quant_dot_kquants_tiles.h for why).
//
// Per super-block and token, the reference's (d * dx) * float(isum), then sum + term, lane-wise
// and in block order as separate instructions (the files build with -ffp-contract=off).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/quant_dot_q8k_x8_call.h"
#include "kernels/cpu/quant_dot_x8_walk.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kSuper = 256;
constexpr size_t kBlockBytes = 1680;  // one super-block of a group (quant_dot.h)
constexpr size_t kScaleOffset = 16;
constexpr size_t kChunkOffset = 144;  // chunk c (64 elements) at 144 + 384c: 256 low, 128 top bytes
constexpr size_t kChunkBytes = 384;
constexpr size_t kTopOffset = 256;    // within a chunk
constexpr size_t kSumsPerBlock = 16;  // Q8_K bsums per super-block

// The 6-bit quants of one quad for the low-nibble and high-nibble groups: (v's nibble) | (the two
// top bits at `shift` and shift + 2 of h) << 4.
[[gnu::always_inline]] inline void q6_k_x8_quants(__m256i v, __m256i h, int shift, __m256i& lo,
                                                  __m256i& hi) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i top2 = _mm256_set1_epi8(0x30);
  const __m256i hs = _mm256_srli_epi16(h, shift);
  lo = _mm256_or_si256(_mm256_and_si256(v, low4), _mm256_and_si256(_mm256_slli_epi16(hs, 4), top2));
  hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4),
                       _mm256_and_si256(_mm256_slli_epi16(hs, 2), top2));
}

// One group (at g0, `blocks` super-blocks) against the tile's T tokens. No software prefetch (see
// quant_dot_x8_walk.h).
template <int T>
void run_q6_k_x8_tile(const uint8_t* g0, size_t blocks, const Q8KTokens<T>& x,
                      const X8Outputs<T>& y) {
  __m256 sum[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) sum[t] = _mm256_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = g0 + b * kBlockBytes;
    prefetch_tile_block<Q6KX8Isa::kPrefetchAhead, T>(blk, kBlockBytes);
    const int8_t* xq[T];
    const int16_t* bs[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      xq[t] = x.xq[t] + b * kSuper;
      bs[t] = x.bsums[t] + b * kSumsPerBlock;
    }
    __m256i isum[T];
    Q6KX8Isa::template block_sums<T>(blk, xq, bs, isum);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m256 term =
          _mm256_mul_ps(_mm256_mul_ps(dw, _mm256_set1_ps(x.xd[t][b])), _mm256_cvtepi32_ps(isum[t]));
      sum[t] = _mm256_add_ps(sum[t], term);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) store_lanes(sum[t], y.out[t], y.lane_begin, y.lane_end);
}

// run_q6_k_x8_tile as quant_dot_q8k_x8_call.h's Tile.
struct Q6KX8Tile {
  template <int T, bool kExpanded>
  static void run(const uint8_t* g0, size_t blocks, const Q8KTokens<T>& x, const X8Outputs<T>& y) {
    static_assert(!kExpanded, "the Q6_K tiles broadcast their activations");
    run_q6_k_x8_tile<T>(g0, blocks, x, y);
  }
};

// The InterleavedDotFn contract (quant_dot.h) on this file's tiles.
void dot_q6_k_x8(const uint8_t* groups, size_t row_begin, size_t row_end, const ActivationRows& x,
                 float* y, size_t y_stride) {
  q8k_x8_dot<Q6KX8Tile>(groups, kBlockBytes, row_begin, row_end, x, y, y_stride);
}

}  // namespace
}  // namespace tandem::kernels::detail
