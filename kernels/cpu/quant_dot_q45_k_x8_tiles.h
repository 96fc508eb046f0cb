// The dot products of Q4_K and Q5_K weights in their interleaved x8 layouts (quant_dot.h) with
// Q8_K activations, bit-identical to the scalar references dot_q4_k_scalar / dot_q5_k_scalar on the
// plain rows, as templates that an ISA file (quant_dot_q45_k_x8_avx2.cpp,
// quant_dot_q45_k_x8_avx512_vnni.cpp) instantiates under its own -m flags with its integer steps.
// Before including this header a file defines, in tandem::kernels::detail's anonymous namespace, a
// struct Q45KX8Isa with:
//   static __m256i scale_vector(__m256i s32): from row i's sub-block scale s in int32 lane i, the
//     form its finish step multiplies with;
//   static __m256i step(__m256i acc, __m256i w, __m256i x): acc plus the products of the unsigned
//     quants w (0..15, Q5_K: 0..31) and the signed activation quants x, lane by lane, in its own
//     accumulator form;
//   template <int kQuantMax> static constexpr int exact_steps(): how many steps from zero one
//     accumulator takes exactly with quants up to kQuantMax (at least 4);
//   static __m256i merge(__m256i a, __m256i b): the sum of two accumulators of that form (used
//     only where twice a chain's steps stay within exact_steps);
//   static __m256i finish(__m256i isum, __m256i acc, __m256i scale): isum plus, in int32 lane i,
//     scale_i times the exact sum lane i of acc holds.
//   static constexpr size_t kPrefetchAhead: how far ahead (bytes) the tiles of up to 4 tokens
//     prefetch each block they stream (prefetch_ahead.h; 0: none).
// Everything here has internal linkage (see quant_dot_kquants_tiles.h for why).
//
// Technique: one 32-bit lane per weight row, no horizontal reduction. Per sub-block pair c and
// quad m, one 32-byte load holds four quants of sub-block 2c (low nibbles) and of 2c + 1 (high
// nibbles) of each of the eight rows (Q5_K: with their fifth bits, one 32-byte load per four quads
// at bits m % 4 and 4 + m % 4); the matching four activation quants broadcast to every lane
// make one step per sub-block (VNNI: one vpdpbusd, four products per lane in int32). After a
// sub-block's eight quads each lane holds its row's exact sub-block sum, which finish scales by
// that row's scale (VNNI: vpmulld) into isum (AVX2: maddubs, the chain's pair sums added in int16,
// one vpmaddwd by the scale; without the software prefetches that once made it slower for one
// token than the plain-row AVX2 kernel, it streams a 256 MiB matrix at 24 GB/s on a Zen 4 thread
// where the plain rows read 9.6).
// imin = sum_j min_j * (bsums[2j] + bsums[2j + 1]) is four vpmaddwd of (min_2c, min_2c+1) int16
// pairs with the token's pair sums. Then, lane-wise and in block order, the reference's
// ((dw * dx) * float(isum)) - ((dmin * dx) * float(imin)) and sum + term as separate instructions.
// Every integer is exact: |sub-block sum| <= 32 * 31 * 128, times a scale <= 63 and eight of them
// stay below 2^26.
//
// Register blocking: the tiles of quant_dot_x8_walk.h (one group x 4, 2 or 1 tokens) share each
// quant load among the tile's tokens; the (scale, min) vectors of a group's super-block are
// unpacked once per tile.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/quant_dot_q4_k_x8_scales.h"
#include "kernels/cpu/quant_dot_q8k_x8_call.h"
#include "kernels/cpu/quant_dot_x8_walk.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kSuper = 256;
constexpr size_t kQuantOffset = 128;     // the chunks after the header of d, dmin, scales and mins
constexpr size_t kHighBitsOffset = 256;  // Q5_K: within a chunk
constexpr size_t kSumsPerBlock = 16;     // Q8_K bsums per super-block

// The two layouts: a group super-block's bytes, a 64-element chunk's bytes, the largest quant.
struct Q4KX8Format {
  static constexpr size_t kBlockBytes = 1152;
  static constexpr size_t kChunkBytes = 256;
  static constexpr int kQuantMax = 15;
};
struct Q5KX8Format {
  static constexpr size_t kBlockBytes = 1408;
  static constexpr size_t kChunkBytes = 320;
  static constexpr int kQuantMax = 31;
};

// A group super-block's scales and mins, unpacked: sc[j] holds row i's scale of sub-block j in
// lane i (in Q45KX8Isa::scale_vector's form); mins[c] holds (min_2c, min_2c+1) of row i as the two
// int16 halves of lane i.
struct Scales {
  __m256i sc[8];
  __m256i mins[4];
};

[[gnu::always_inline]] inline void unpack_scales(const uint8_t* blk, Scales& s) {
  // Entries 0..31 (sub-blocks 0-3) and 32..63 (sub-blocks 4-7), one byte each.
  alignas(32) uint8_t sc[64];
  alignas(32) uint8_t mn[64];
  q4_k_x8_scale_bytes(blk, sc, mn);
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    s.sc[j] = Q45KX8Isa::scale_vector(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 8 * j))));
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m128i even = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn + 16 * c));
    const __m128i odd = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn + 16 * c + 8));
    s.mins[c] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(even, odd));
  }
}

// The quants of quad m (m < 8) of the 64-element chunk at `chunk`, as bytes in the eight rows'
// lanes: wl of sub-block 2c (the low nibbles), wh of 2c + 1 (the high ones), with their fifth bits
// for Q5_K. hb carries the chunk's fifth-bit bytes from quad to quad (loaded when m % 4 == 0;
// quad m's bits sit at m % 4 for the low nibbles and 4 + m % 4 for the high ones).
template <class Format>
[[gnu::always_inline]] inline void q45_k_x8_quad(const uint8_t* chunk, int m, __m256i& hb,
                                                 __m256i& wl, __m256i& wh) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 32 * m));
  wl = _mm256_and_si256(v, low4);
  wh = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
  if constexpr (Format::kQuantMax > 15) {
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    if (m % 4 == 0) {
      hb = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(chunk + kHighBitsOffset + 32 * (m / 4)));
    }
    wl = _mm256_or_si256(wl, _mm256_and_si256(_mm256_slli_epi16(hb, 4 - m % 4), bit4));
    wh = _mm256_or_si256(wh, _mm256_and_si256(_mm256_srli_epi16(hb, m % 4), bit4));
  }
}

// A tile's tokens: token t's quants, scales and bsums.
template <int T>
using Tokens = Q8KTokens<T>;

// One group (at g0, `blocks` super-blocks) against the tile's T tokens. No software prefetch: a
// group is one sequential run of bytes, which the hardware prefetchers stream best (see
// quant_dot_x8_walk.h).
template <class Format, int T, bool kExpanded>
void run_tile(const uint8_t* g0, size_t blocks, const Tokens<T>& x, const X8Outputs<T>& y) {
  constexpr int kExact = Q45KX8Isa::template exact_steps<Format::kQuantMax>();
  static_assert(kExact >= 4, "a chain of four steps must stay exact");
  // With one to three tokens, two chains of four steps (quads alternating between them): a single
  // chain of eight steps waits on each step's latency. They are merged before the scale where
  // eight steps stay exact, else each is scaled on its own. With four tokens one chain, scaled
  // after every kFlush steps: a second set of chains would not fit the 16 registers.
  constexpr int kChains = T < 4 ? 2 : 1;
  constexpr bool kMerge = kExact >= 8;
  constexpr int kFlush = kExact >= 8 ? 8 : 4;
  __m256 sum[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) sum[t] = _mm256_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = g0 + b * Format::kBlockBytes;
    prefetch_tile_block<Q45KX8Isa::kPrefetchAhead, T>(blk, Format::kBlockBytes);
    Scales s;
    unpack_scales(blk, s);
    __m256i isum[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      __m256i lo[T][kChains];
      __m256i hi[T][kChains];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
#pragma GCC unroll 2
        for (int k = 0; k < kChains; ++k) {
          lo[t][k] = _mm256_setzero_si256();
          hi[t][k] = _mm256_setzero_si256();
        }
      }
      const uint8_t* chunk = blk + kQuantOffset + Format::kChunkBytes * c;
      __m256i hb = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m) {
        __m256i wl, wh;
        q45_k_x8_quad<Format>(chunk, m, hb, wl, wh);
        const int k = m % kChains;
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const size_t xb = b * kSuper + 64 * c + 4 * m;
          lo[t][k] = Q45KX8Isa::step(lo[t][k], wl, token_quad<kExpanded>(x, t, xb));
          hi[t][k] = Q45KX8Isa::step(hi[t][k], wh, token_quad<kExpanded>(x, t, xb + 32));
          if constexpr (kChains == 1) {
            if ((m + 1) % kFlush == 0) {
              isum[t] = Q45KX8Isa::finish(isum[t], lo[t][0], s.sc[2 * c]);
              isum[t] = Q45KX8Isa::finish(isum[t], hi[t][0], s.sc[2 * c + 1]);
              lo[t][0] = _mm256_setzero_si256();
              hi[t][0] = _mm256_setzero_si256();
            }
          }
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        if constexpr (kChains == 1) {
          // Scaled in the loop above.
        } else if constexpr (kMerge) {
          isum[t] = Q45KX8Isa::finish(isum[t], Q45KX8Isa::merge(lo[t][0], lo[t][1]), s.sc[2 * c]);
          isum[t] =
              Q45KX8Isa::finish(isum[t], Q45KX8Isa::merge(hi[t][0], hi[t][1]), s.sc[2 * c + 1]);
        } else {
#pragma GCC unroll 2
          for (int k = 0; k < 2; ++k) {
            isum[t] = Q45KX8Isa::finish(isum[t], lo[t][k], s.sc[2 * c]);
            isum[t] = Q45KX8Isa::finish(isum[t], hi[t][k], s.sc[2 * c + 1]);
          }
        }
      }
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
    const __m256 dmin =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16)));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      // The token's eight sub-block sums bsums[2j] + bsums[2j + 1] (|.| <= 4096), as int16 pairs
      // (j = 2c, 2c + 1) broadcast per c.
      const int16_t* bs = x.bsums[t] + b * kSumsPerBlock;
      const __m256i pairs = _mm256_castsi128_si256(
          _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bs)),
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(bs + 8))));
      __m256i imin =
          _mm256_madd_epi16(s.mins[0], _mm256_permutevar8x32_epi32(pairs, _mm256_set1_epi32(0)));
#pragma GCC unroll 3
      for (int c = 1; c < 4; ++c) {
        imin = _mm256_add_epi32(
            imin,
            _mm256_madd_epi16(s.mins[c], _mm256_permutevar8x32_epi32(pairs, _mm256_set1_epi32(c))));
      }
      const __m256 dx = _mm256_set1_ps(x.xd[t][b]);
      const __m256 term =
          _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(isum[t])),
                        _mm256_mul_ps(_mm256_mul_ps(dmin, dx), _mm256_cvtepi32_ps(imin)));
      sum[t] = _mm256_add_ps(sum[t], term);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) store_lanes(sum[t], y.out[t], y.lane_begin, y.lane_end);
}

// run_tile as quant_dot_q8k_x8_call.h's Tile.
template <class Format>
struct Tile {
  static constexpr size_t kExpandTokens = expand_tokens<Q45KX8Isa>();
  template <int T, bool kExpanded>
  static void run(const uint8_t* g0, size_t blocks, const Tokens<T>& x, const X8Outputs<T>& y) {
    run_tile<Format, T, kExpanded>(g0, blocks, x, y);
  }
};

// The InterleavedDotFn contract (quant_dot.h) on this file's tiles, per layout.
void dot_q4_k_x8(const uint8_t* groups, size_t row_begin, size_t row_end, const ActivationRows& x,
                 float* y, size_t y_stride) {
  q8k_x8_dot<Tile<Q4KX8Format>>(groups, Q4KX8Format::kBlockBytes, row_begin, row_end, x, y,
                                y_stride);
}

void dot_q5_k_x8(const uint8_t* groups, size_t row_begin, size_t row_end, const ActivationRows& x,
                 float* y, size_t y_stride) {
  q8k_x8_dot<Tile<Q5KX8Format>>(groups, Q5KX8Format::kBlockBytes, row_begin, row_end, x, y,
                                y_stride);
}

}  // namespace
}  // namespace tandem::kernels::detail
