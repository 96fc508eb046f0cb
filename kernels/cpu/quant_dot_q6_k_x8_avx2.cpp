// AVX2 (+FMA +F16C) dot product of Q6_K weights in the interleaved x8 layout (quant_dot.h) with
// Q8_K activations, bit-identical to dot_q6_k_scalar on the plain rows (the tiles of
// quant_dot_q6_k_x8_tiles.h). Built with -mavx2 -mfma -mf16c -ffp-contract=off but linked into
// binaries that run on any x86-64: only the exported function has external linkage.
//
// Technique (the lanes of quant_dot_q6_k_x8_avx512_vnni.cpp without vpdpbusd): one 32-bit lane
// per weight row. Per pair of quads (m, m + 1) of a 64-element chunk c, two 32-byte loads of low
// nibbles and one of top bits give each row's eight 6-bit quants q (0..63) of groups 4c + m / 4
// and 4c + 2 + m / 4; per group, two maddubs with the broadcast activation quants, added in int16
// (each at most 2 * 63 * 128 = 16128 in magnitude, two 32256: no saturation or wrap), and one
// vpmaddwd by the row's int8 scale (in both int16 halves of its lane) add scale * sum(q * x) to
// isum in int32. isum starts at -32 * sum_g scale_g * bsum_g (eight vpmaddwd of (scale_2p,
// scale_2p+1) pairs with the token's bsum pairs), so it ends as the reference's exact
// sum_g scale_g * sum((q - 32) * x). Every integer is exact: |isum| stays below
// 16 * 128 * (16 * 63 * 128 + 32 * 2048).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/simd_chain.h"

namespace tandem::kernels::detail {
namespace {

struct Q6KX8Isa {
  // The tiles of up to 4 tokens prefetch this far ahead (prefetch_ahead.h): on a first-generation
  // Zen EPYC the hardware prefetchers alone left them streaming at 70-80 % of their in-cache rate.
  static constexpr size_t kPrefetchAhead = 2048;
  template <int T>
  static void block_sums(const uint8_t* blk, const int8_t* const* xq, const int16_t* const* bsums,
                         __m256i* isum);
};

}  // namespace
}  // namespace tandem::kernels::detail

#include "kernels/cpu/quant_dot_q6_k_x8_tiles.h"
// After the tiles: the lanes use their constants.
#include "kernels/cpu/quant_dot_q6_k_x8_lanes.h"
#include "kernels/cpu/quant_dot_x8_lanes_avx2.h"

namespace tandem::kernels::detail {
namespace {

// Row i's int8 scale of group g in both int16 halves of lane i.
[[gnu::always_inline]] inline __m256i scale_halves(const uint8_t* blk, int g) {
  const __m256i s32 = _mm256_cvtepi8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + kScaleOffset + 8 * g)));
  return _mm256_or_si256(_mm256_and_si256(s32, _mm256_set1_epi32(0xffff)),
                         _mm256_slli_epi32(s32, 16));
}

// (scale_2p, scale_2p+1) of row i as the two int16 halves of lane i.
[[gnu::always_inline]] inline __m256i scale_pair(const uint8_t* blk, int p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kScaleOffset + 16 * p));
  return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(v, _mm_srli_si128(v, 8)));
}

// Two quads' sums of quants times activation quants, in int16 pairs.
[[gnu::always_inline]] inline __m256i pair_sums(__m256i w0, __m256i w1, const int8_t* xb) {
  return _mm256_add_epi16(_mm256_maddubs_epi16(w0, broadcast4(xb)),
                          _mm256_maddubs_epi16(w1, broadcast4(xb + 4)));
}

template <int T>
void Q6KX8Isa::block_sums(const uint8_t* blk, const int8_t* const* xq, const int16_t* const* bsums,
                          __m256i* isum) {
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int p = 0; p < 8; ++p) {
    const __m256i sp = scale_pair(blk, p);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      int32_t bs;
      std::memcpy(&bs, bsums[t] + 2 * p, 4);
      isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(sp, _mm256_set1_epi32(bs)));
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    isum[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(isum[t], 5));
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const uint8_t* chunk = blk + kChunkOffset + kChunkBytes * c;
#pragma GCC unroll 4
    for (int m = 0; m < 8; m += 2) {
      const __m256i h =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + kTopOffset + 16 * m));
      __m256i lo0, hi0, lo1, hi1;
      q6_k_x8_quants(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 32 * m)), h, 0,
                     lo0, hi0);
      q6_k_x8_quants(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 32 * m + 32)), h,
                     4, lo1, hi1);
      const __m256i sl = scale_halves(blk, 4 * c + m / 4);
      const __m256i sh = scale_halves(blk, 4 * c + 2 + m / 4);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int8_t* xb = xq[t] + 64 * c + 4 * m;
        isum[t] = chain_barrier(
            _mm256_add_epi32(isum[t], _mm256_madd_epi16(pair_sums(lo0, lo1, xb), sl)));
        isum[t] = chain_barrier(
            _mm256_add_epi32(isum[t], _mm256_madd_epi16(pair_sums(hi0, hi1, xb + 32), sh)));
      }
    }
  }
}

}  // namespace

void dot_q6_k_x8_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                      const ActivationRows& x, float* y, size_t y_stride) {
  if (x.n_tokens >= LanesAvx2::kMinTokens) {
    x8_lanes_dot<LanesAvx2, Q6KLanes>(groups, row_begin, row_end, x, y, y_stride, dot_q6_k_x8,
                                      dot_q6_k_x8);
    return;
  }
  dot_q6_k_x8(groups, row_begin, row_end, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
