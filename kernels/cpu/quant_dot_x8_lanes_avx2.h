// The tokens-in-lanes walk (quant_dot_x8_lanes.h) on AVX2: 8 tokens per 256-bit register. Per two
// quads of a row and 8 tokens, two maddubs (the unsigned activations by the row's four weights,
// broadcast) added in int16 and one vpmaddwd by the row's scale of the group, which sums the pairs
// and scales them into int32 at once; the min term by vpmaddwd. Exact: a maddubs pair is at most
// 2 * 255 * 32 = 16320 in magnitude, two of them 32640 < 2^15, times a scale of at most 128.
// Included by the x8 AVX2 kernel files after the layouts' headers; internal linkage.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/quant_dot_x8_lanes.h"
#include "kernels/cpu/simd_chain.h"

namespace tandem::kernels::detail {
namespace {

struct LanesAvx2 {
  static constexpr size_t kTokens = 8;
  static constexpr size_t kMinTokens = 16;  // fewer: the x8 tiles
  static constexpr size_t kPadTokens = 6;   // a last partial 8 of at least this many is padded
  static constexpr size_t kChunk = 8;       // registers (64 tokens) per pass over a window
  using Tokens = LaneTokens<kTokens>;

  // pack_lane_tokens' quads k0 .. k0 + 7 of tokens t0 .. t0 + 7: an 8 x 8 transpose of 32-bit
  // units.
  static void pack_quads(const ActivationRows& x, size_t t0, size_t live, size_t k0,
                         LaneInts<kTokens>* out) {
    __m256i r[kTokens];
    for (size_t l = 0; l < kTokens; ++l) {
      r[l] = l < live ? _mm256_loadu_si256(
                            reinterpret_cast<const __m256i*>(x.qs + (t0 + l) * x.cols + 4 * k0))
                      : _mm256_setzero_si256();
    }
    transpose8x8_epi32(r);
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    for (size_t i = 0; i < kTokens; ++i) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(out[i].v), _mm256_xor_si256(r[i], flip));
    }
  }

  static __m256i load(const LaneInts<kTokens>& u) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(u.v));
  }

  // Rows r0 .. r0 + R - 1 of super-block b (unpacked in p) against token registers g0 .. g0 + T -
  // 1: sum[t][r0 + r] += the block's term.
  template <class Layout, int R, int T>
  [[gnu::always_inline]] static void tile(const LaneBlock& p, const Tokens& x, size_t b, size_t g0,
                                          int r0, __m256 (*sum)[kLaneRows]) {
    constexpr int kGroupQuads = static_cast<int>(Layout::kScaleQuads);
    // Quads whose maddubs pairs add up in int16 before the vpmaddwd: each pair is at most 2 * 255
    // * kMaxWeight in magnitude.
    constexpr int kFit = 32767 / (2 * 255 * Layout::kMaxWeight);
    constexpr int kRun = kFit >= 4 ? 4 : kFit >= 2 ? 2 : 1;
    static_assert(kFit >= 1 && kGroupQuads % kRun == 0);
    const size_t quads = x.blocks * kLaneQuads;
    const LaneInts<kTokens>* xq[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) xq[t] = x.qs + (g0 + t) * quads + b * kLaneQuads;
    // isum starts at -bias: what the unsigned activations add.
    __m256i isum[R][T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256i start = _mm256_set1_epi32(-p.bias[r0 + r]);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) isum[r][t] = start;
    }
#pragma GCC unroll 1
    for (int s = 0; s < 64 / kGroupQuads; ++s) {
#pragma GCC unroll 4
      for (int k = 0; k < kGroupQuads; k += kRun) {
        const int quad = s * kGroupQuads + k;
        __m256i a[kRun][T];
#pragma GCC unroll 4
        for (int j = 0; j < kRun; ++j) {
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) a[j][t] = load(xq[t][quad + j]);
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          __m256i w[kRun];
#pragma GCC unroll 4
          for (int j = 0; j < kRun; ++j) {
            int32_t v;
            std::memcpy(&v, p.q[quad + j][r0 + r], 4);
            w[j] = _mm256_set1_epi32(v);
          }
          const __m256i scale = _mm256_set1_epi16(static_cast<int16_t>(p.sc[s][r0 + r]));
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) {
            __m256i pairs = _mm256_maddubs_epi16(a[0][t], w[0]);
#pragma GCC unroll 3
            for (int j = 1; j < kRun; ++j) {
              pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(a[j][t], w[j]));
            }
            isum[r][t] =
                chain_barrier(_mm256_add_epi32(isum[r][t], _mm256_madd_epi16(pairs, scale)));
          }
        }
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m256 dx = _mm256_load_ps(x.d[(g0 + t) * x.blocks + b].v);
      const LaneInts<kTokens>* pr = x.pairs + ((g0 + t) * x.blocks + b) * x.min_pairs;
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int i = r0 + r;
        __m256 term = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(p.dw[i]), dx),
                                    _mm256_cvtepi32_ps(isum[r][t]));
        if constexpr (Layout::kMinPairs > 0) {
          __m256i imin = _mm256_madd_epi16(load(pr[0]), _mm256_set1_epi32(p.mins[0][i]));
#pragma GCC unroll 7
          for (int c = 1; c < Layout::kMinPairs; ++c) {
            imin = _mm256_add_epi32(
                imin, _mm256_madd_epi16(load(pr[c]), _mm256_set1_epi32(p.mins[c][i])));
          }
          term = _mm256_sub_ps(term, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(p.dmin[i]), dx),
                                                   _mm256_cvtepi32_ps(imin)));
        }
        sum[t][i] = _mm256_add_ps(sum[t][i], term);
      }
    }
  }

  // Token registers [g0, g1) (at most kChunk) against every super-block of one group's window.
  template <class Layout>
  static void chunk(const LaneBlock* window, const Tokens& x, size_t g0, size_t g1, size_t n,
                    float* y, size_t y_stride, size_t col) {
    __m256 sum[kChunk][kLaneRows];
    for (size_t t = 0; t < g1 - g0; ++t) {
      for (size_t r = 0; r < kLaneRows; ++r) sum[t][r] = _mm256_setzero_ps();
    }
    for (size_t b = 0; b < x.blocks; ++b) {
      size_t g = g0;
      for (; g + 2 <= g1; g += 2) {
        for (int r0 = 0; r0 < static_cast<int>(kLaneRows); r0 += 2) {
          tile<Layout, 2, 2>(window[b], x, b, g, r0, sum + (g - g0));
        }
      }
      if (g < g1) {
        tile<Layout, 4, 1>(window[b], x, b, g, 0, sum + (g - g0));
        tile<Layout, 4, 1>(window[b], x, b, g, 4, sum + (g - g0));
      }
    }
    for (size_t g = g0; g < g1; ++g) {
      LaneFloats<kTokens> out[kLaneRows];
      for (size_t r = 0; r < kLaneRows; ++r) _mm256_store_ps(out[r].v, sum[g - g0][r]);
      store_lane_sums(out, g, n, y, y_stride, col);
    }
  }
};

}  // namespace
}  // namespace tandem::kernels::detail
