// The tokens-in-lanes walk (quant_dot_x8_lanes.h) on AVX-512 VNNI: 16 tokens per 512-bit register,
// one vpdpbusd per four quants of a row and 16 tokens (the row's four weights broadcast), the
// scale group's sum scaled by vpmulld, the min term by vpdpwssd. Included by the x8 AVX-512 VNNI
// kernel files after the layouts' headers; internal linkage.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/quant_dot_x8_lanes.h"
#include "kernels/cpu/transpose_avx512.h"

namespace tandem::kernels::detail {
namespace {

struct LanesAvx512 {
  static constexpr size_t kTokens = 16;
  static constexpr size_t kMinTokens = 16;  // fewer: the pair tiles
  static constexpr size_t kPadTokens = 12;  // a last partial 16 of at least this many is padded
  static constexpr size_t kChunk = 4;       // registers (64 tokens) per pass over a window
  using Tokens = LaneTokens<kTokens>;

  // pack_lane_tokens' quads k0 .. k0 + 15 of tokens t0 .. t0 + 15: a 16 x 16 transpose of 32-bit
  // units.
  static void pack_quads(const ActivationRows& x, size_t t0, size_t live, size_t k0,
                         LaneInts<kTokens>* out) {
    __m512i r[kTokens];
    for (size_t l = 0; l < kTokens; ++l) {
      r[l] =
          l < live ? _mm512_loadu_si512(x.qs + (t0 + l) * x.cols + 4 * k0) : _mm512_setzero_si512();
    }
    transpose16x16_epi32(r);
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (size_t i = 0; i < kTokens; ++i) {
      _mm512_store_si512(out[i].v, _mm512_xor_si512(r[i], flip));
    }
  }

  // Rows r0 .. r0 + R - 1 of super-block b (unpacked in p) against token registers g0 .. g0 + T -
  // 1: sum[t][r0 + r] += the block's term.
  template <class Layout, int R, int T>
  [[gnu::always_inline]] static void tile(const LaneBlock& p, const Tokens& x, size_t b, size_t g0,
                                          int r0, __m512 (*sum)[kLaneRows]) {
    constexpr int kGroupQuads = static_cast<int>(Layout::kScaleQuads);
    const size_t quads = x.blocks * kLaneQuads;
    const LaneInts<kTokens>* xq[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) xq[t] = x.qs + (g0 + t) * quads + b * kLaneQuads;
    // isum starts at -bias: what the unsigned activations add.
    __m512i isum[R][T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512i start = _mm512_set1_epi32(-p.bias[r0 + r]);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) isum[r][t] = start;
    }
#pragma GCC unroll 1
    for (int s = 0; s < 64 / kGroupQuads; ++s) {
      __m512i acc[R][T];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_si512();
      }
#pragma GCC unroll 8
      for (int k = 0; k < kGroupQuads; ++k) {
        const int quad = s * kGroupQuads + k;
        __m512i a[T];
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) a[t] = _mm512_load_si512(xq[t][quad].v);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          int32_t wv;
          std::memcpy(&wv, p.q[quad][r0 + r], 4);
          const __m512i w = _mm512_set1_epi32(wv);
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) acc[r][t] = _mm512_dpbusd_epi32(acc[r][t], a[t], w);
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i scale = _mm512_set1_epi32(p.sc[s][r0 + r]);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          isum[r][t] = _mm512_add_epi32(isum[r][t], _mm512_mullo_epi32(acc[r][t], scale));
        }
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m512 dx = _mm512_load_ps(x.d[(g0 + t) * x.blocks + b].v);
      const LaneInts<kTokens>* pr = x.pairs + ((g0 + t) * x.blocks + b) * x.min_pairs;
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int i = r0 + r;
        __m512 term = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(p.dw[i]), dx),
                                    _mm512_cvtepi32_ps(isum[r][t]));
        if constexpr (Layout::kMinPairs > 0) {
          __m512i imin =
              _mm512_madd_epi16(_mm512_load_si512(pr[0].v), _mm512_set1_epi32(p.mins[0][i]));
#pragma GCC unroll 7
          for (int c = 1; c < Layout::kMinPairs; ++c) {
            imin = _mm512_dpwssd_epi32(imin, _mm512_load_si512(pr[c].v),
                                       _mm512_set1_epi32(p.mins[c][i]));
          }
          term = _mm512_sub_ps(term, _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(p.dmin[i]), dx),
                                                   _mm512_cvtepi32_ps(imin)));
        }
        sum[t][i] = _mm512_add_ps(sum[t][i], term);
      }
    }
  }

  // Token registers [g0, g1) (at most kChunk) against every super-block of one group's window.
  template <class Layout>
  static void chunk(const LaneBlock* window, const Tokens& x, size_t g0, size_t g1, size_t n,
                    float* y, size_t y_stride, size_t col) {
    __m512 sum[kChunk][kLaneRows];
    for (size_t t = 0; t < g1 - g0; ++t) {
      for (size_t r = 0; r < kLaneRows; ++r) sum[t][r] = _mm512_setzero_ps();
    }
    for (size_t b = 0; b < x.blocks; ++b) {
      size_t g = g0;
      for (; g + 2 <= g1; g += 2) {
        tile<Layout, 4, 2>(window[b], x, b, g, 0, sum + (g - g0));
        tile<Layout, 4, 2>(window[b], x, b, g, 4, sum + (g - g0));
      }
      if (g < g1) tile<Layout, 8, 1>(window[b], x, b, g, 0, sum + (g - g0));
    }
    for (size_t g = g0; g < g1; ++g) {
      LaneFloats<kTokens> out[kLaneRows];
      for (size_t r = 0; r < kLaneRows; ++r) _mm512_store_ps(out[r].v, sum[g - g0][r]);
      store_lane_sums(out, g, n, y, y_stride, col);
    }
  }
};

}  // namespace
}  // namespace tandem::kernels::detail
