// Tokens in the lanes: the many-token (prefill) walk of the K-quant x8 kernels (Q4_K, Q5_K, Q6_K;
// quant_dot.h's layouts) with Q8_K activations on AVX-512 VNNI, bit-identical to the scalar
// references. Each layout brings its unpacking (quant_dot_q45_k_x8_lanes_avx512.h,
// quant_dot_q6_k_x8_lanes_avx512.h); included by the x8 AVX-512 VNNI kernel files, internal
// linkage.
//
// Technique. The x8 tiles put one weight row in each 32-bit lane and broadcast four activation
// quants per vpdpbusd, so every token's four quants cost a broadcast and every four tokens unpack
// the weights again. Here one 512-bit register holds the same four quants of 16 tokens (packed
// once per call: a 16 x 16 transpose of 32-bit units per 64 columns), a group's weights are
// unpacked once per call into a window of signed bytes in the same order (32-element sub-block j,
// quad q, row i: row i's elements 32j + 4q .. + 3), and each vpdpbusd multiplies 16 tokens by one
// row's four weights, broadcast from the window as the instruction's memory operand. vpdpbusd
// takes that operand as signed bytes, so the weights are it and the activation quants go in as
// unsigned bytes, plus 128; the extra 128 * sum_g scale_g * (sum of group g's weights) is a
// per-row constant of the super-block (`bias`), subtracted once. Per scale group (32 elements for
// Q4_K / Q5_K, 16 for Q6_K) the int32 sum is scaled by the row's scale (vpmulld) into isum; per
// super-block, lane-wise, the reference's float terms (with imin = sum_j min_j * (bsums[2j] +
// bsums[2j + 1]) from four vpdpwssd of int16 pairs where the type has mins) added to the token's
// sum. Every integer is exact: a group's sum of q * (x + 128) is at most 32 * 31 * 255 (Q6_K:
// 16 * 32 * 255), times a scale <= 63 (128) and summed over the super-block it stays below 2^29.
//
// Calls of fewer than kLanesMinTokens tokens keep the pair tiles. Tokens after the last whole 16
// are padded to 16 when at least kLanesPadTokens remain, else run on the 256-bit tiles per group
// while its rows are in cache; rows outside whole groups of the range run on the 256-bit tiles.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/transpose_avx512.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kLaneTokens = 16;      // tokens per 512-bit register, one per 32-bit lane
constexpr size_t kLanesMinTokens = 16;  // fewer: the pair tiles
constexpr size_t kLanesPadTokens = 12;  // a last partial 16 of at least this many is padded
static_assert(kLanesPadTokens <= kLanesMinTokens, "the tokens left over take the few-token kernel");
constexpr size_t kLanesChunk = 4;   // token registers (64 tokens) per pass over a window
constexpr size_t kLaneRows = 8;     // rows of an x8 group
constexpr size_t kLaneSuper = 256;  // elements per Q8_K super-block
constexpr size_t kLaneQuads = 64;   // four-element units per super-block
constexpr size_t kLaneBsums = 16;   // Q8_K bsums per super-block

// The call's activations in lanes, packed once per call:
//  qs[g * quads + k]:                  lane l = token 16g + l's quants 4k .. 4k + 3, each + 128;
//  pairs[(g * blocks + b) * 4 + c]:    lane l = token 16g + l's (S_2c, S_2c+1) as int16 halves,
//                                      S_j = bsums[2j] + bsums[2j + 1] of super-block b;
//  d[g * blocks + b]:                  lane l = token 16g + l's scale of super-block b.
// Padding lanes (tokens past the packed count) hold quants 128, sums 0 and scale 0.
// One 512-bit register's worth, 64-byte aligned (a vector of __m512i would drop the alignment).
struct alignas(64) LaneUnit {
  int32_t v[kLaneTokens];
};
struct alignas(64) LaneScales {
  float v[kLaneTokens];
};

struct LaneTokens {
  const LaneUnit* qs;
  const LaneUnit* pairs;
  const LaneScales* d;
  size_t groups;  // registers of 16 tokens
  size_t blocks;  // super-blocks per row
};

struct LaneBuffers {
  std::vector<LaneUnit> qs;
  std::vector<LaneUnit> pairs;
  std::vector<LaneScales> d;
};

// The first n tokens of x, packed into buf.
LaneTokens pack_lane_tokens(const ActivationRows& x, size_t n, LaneBuffers& buf) {
  const size_t blocks = x.cols / kLaneSuper;
  const size_t quads = blocks * kLaneQuads;
  const size_t groups = (n + kLaneTokens - 1) / kLaneTokens;
  if (buf.qs.size() < groups * quads) buf.qs.resize(groups * quads);
  if (buf.pairs.size() < groups * blocks * 4) buf.pairs.resize(groups * blocks * 4);
  if (buf.d.size() < groups * blocks) buf.d.resize(groups * blocks);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (size_t g = 0; g < groups; ++g) {
    const size_t t0 = g * kLaneTokens;
    const size_t live = std::min(kLaneTokens, n - t0);
    for (size_t k0 = 0; k0 < quads; k0 += kLaneTokens) {
      __m512i r[kLaneTokens];
      for (size_t l = 0; l < kLaneTokens; ++l) {
        r[l] = l < live ? _mm512_loadu_si512(x.qs + (t0 + l) * x.cols + 4 * k0)
                        : _mm512_setzero_si512();
      }
      transpose16x16_epi32(r);
      for (size_t i = 0; i < kLaneTokens; ++i) {
        _mm512_store_si512(buf.qs[g * quads + k0 + i].v, _mm512_xor_si512(r[i], flip));
      }
    }
    for (size_t b = 0; b < blocks; ++b) {
      int32_t pairs[4][kLaneTokens] = {};
      float d[kLaneTokens] = {};
      for (size_t l = 0; l < live; ++l) {
        const size_t t = t0 + l;
        const int16_t* bs = x.bsums + (t * blocks + b) * kLaneBsums;
        for (size_t c = 0; c < 4; ++c) {
          const auto s0 = static_cast<uint16_t>(bs[4 * c] + bs[4 * c + 1]);
          const auto s1 = static_cast<uint16_t>(bs[4 * c + 2] + bs[4 * c + 3]);
          pairs[c][l] = static_cast<int32_t>(s0 | (uint32_t{s1} << 16));
        }
        d[l] = x.d[t * blocks + b];
      }
      for (size_t c = 0; c < 4; ++c) {
        std::memcpy(buf.pairs[(g * blocks + b) * 4 + c].v, pairs[c], sizeof pairs[c]);
      }
      std::memcpy(buf.d[g * blocks + b].v, d, sizeof d);
    }
  }
  return LaneTokens{buf.qs.data(), buf.pairs.data(), buf.d.data(), groups, blocks};
}

// One super-block of a group, unpacked for the lanes by the layout's unpack. Scale group s covers
// quads 8j + q with (8j + q) / Layout::kScaleQuads == s.
struct alignas(64) LaneBlock {
  int8_t q[kLaneQuads][kLaneRows][4];  // quad k, row i: row i's elements 4k .. 4k + 3
  int32_t sc[16][kLaneRows];           // row i's scale of scale group s
  int32_t mins[4][kLaneRows];  // layouts with mins: row i's (min_2c, min_2c+1), int16 halves
  int32_t bias[kLaneRows];     // 128 * sum_s sc_s * (sum of group s's weights)
  float dw[kLaneRows];
  float dmin[kLaneRows];  // layouts with mins
};

[[gnu::always_inline]] inline __m512i broadcast_lane(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Rows r0 .. r0 + R - 1 of super-block b (unpacked in p) against token registers g0 .. g0 + T - 1:
// sum[t][r0 + r] += the block's term.
template <class Layout, int R, int T>
[[gnu::always_inline]] inline void lanes_tile(const LaneBlock& p, const LaneTokens& x, size_t b,
                                              size_t g0, int r0, __m512 (*sum)[kLaneRows]) {
  constexpr int kGroupQuads = static_cast<int>(Layout::kScaleQuads);
  const size_t quads = x.blocks * kLaneQuads;
  const LaneUnit* xq[T];
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
        const __m512i w = broadcast_lane(p.q[quad][r0 + r]);
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
    const LaneUnit* pr = x.pairs + ((g0 + t) * x.blocks + b) * 4;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const int i = r0 + r;
      const __m512 fsum = _mm512_cvtepi32_ps(isum[r][t]);
      __m512 term = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(p.dw[i]), dx), fsum);
      if constexpr (Layout::kMins) {
        __m512i imin =
            _mm512_madd_epi16(_mm512_load_si512(pr[0].v), _mm512_set1_epi32(p.mins[0][i]));
        imin =
            _mm512_dpwssd_epi32(imin, _mm512_load_si512(pr[1].v), _mm512_set1_epi32(p.mins[1][i]));
        imin =
            _mm512_dpwssd_epi32(imin, _mm512_load_si512(pr[2].v), _mm512_set1_epi32(p.mins[2][i]));
        imin =
            _mm512_dpwssd_epi32(imin, _mm512_load_si512(pr[3].v), _mm512_set1_epi32(p.mins[3][i]));
        term = _mm512_sub_ps(term, _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(p.dmin[i]), dx),
                                                 _mm512_cvtepi32_ps(imin)));
      }
      sum[t][i] = _mm512_add_ps(sum[t][i], term);
    }
  }
}

// Token registers [g0, g1) (at most kLanesChunk) against every super-block of one group's window;
// writes token t's eight results to y[t * y_stride + col .. + 8) for the first n tokens.
template <class Layout>
void lanes_group_chunk(const LaneBlock* window, const LaneTokens& x, size_t g0, size_t g1, size_t n,
                       float* y, size_t y_stride, size_t col) {
  __m512 sum[kLanesChunk][kLaneRows];
  for (size_t t = 0; t < g1 - g0; ++t) {
    for (size_t r = 0; r < kLaneRows; ++r) sum[t][r] = _mm512_setzero_ps();
  }
  for (size_t b = 0; b < x.blocks; ++b) {
    size_t g = g0;
    for (; g + 2 <= g1; g += 2) {
      lanes_tile<Layout, 4, 2>(window[b], x, b, g, 0, sum + (g - g0));
      lanes_tile<Layout, 4, 2>(window[b], x, b, g, 4, sum + (g - g0));
    }
    if (g < g1) lanes_tile<Layout, 8, 1>(window[b], x, b, g, 0, sum + (g - g0));
  }
  for (size_t g = g0; g < g1; ++g) {
    alignas(64) float out[kLaneRows][kLaneTokens];
    for (size_t r = 0; r < kLaneRows; ++r) _mm512_store_ps(out[r], sum[g - g0][r]);
    const size_t live = std::min(kLaneTokens, n - g * kLaneTokens);
    for (size_t l = 0; l < live; ++l) {
      float* dst = y + (g * kLaneTokens + l) * y_stride + col;
      for (size_t r = 0; r < kLaneRows; ++r) dst[r] = out[r][l];
    }
  }
}

// The InterleavedDotFn contract (quant_dot.h) with the tokens in the lanes for a call of at least
// kLanesMinTokens tokens; narrow is the layout's 256-bit kernel. Layout: kBlockBytes (a group's
// super-block), kScaleQuads (quads per scale: 8 or 4), kMins, and unpack(block, LaneBlock&).
template <class Layout>
void x8_lanes_dot(const uint8_t* groups, size_t row_begin, size_t row_end, const ActivationRows& x,
                  float* y, size_t y_stride,
                  void (*narrow)(const uint8_t*, size_t, size_t, const ActivationRows&, float*,
                                 size_t),
                  void (*few)(const uint8_t*, size_t, size_t, const ActivationRows&, float*,
                              size_t)) {
  const size_t g_first = (row_begin + kLaneRows - 1) / kLaneRows;
  const size_t g_last = row_end / kLaneRows;
  if (g_last <= g_first) {
    narrow(groups, row_begin, row_end, x, y, y_stride);
    return;
  }
  const size_t begin = g_first * kLaneRows;
  const size_t end = g_last * kLaneRows;
  if (row_begin < begin) narrow(groups, row_begin, begin, x, y, y_stride);
  if (end < row_end) narrow(groups, end, row_end, x, y + (end - row_begin), y_stride);
  // The tokens the lanes take; the rest (fewer than kLanesPadTokens) go to narrow per group.
  const size_t n = x.n_tokens % kLaneTokens >= kLanesPadTokens
                       ? x.n_tokens
                       : x.n_tokens / kLaneTokens * kLaneTokens;
  const size_t blocks = x.cols / kLaneSuper;
  ActivationRows rest = x;
  rest.n_tokens = x.n_tokens - n;
  rest.qs = x.qs + n * x.cols;
  rest.d = x.d + n * blocks;
  rest.bsums = x.bsums + n * blocks * kLaneBsums;
  thread_local LaneBuffers buffers;
  thread_local std::vector<LaneBlock> window;
  const LaneTokens packed = pack_lane_tokens(x, n, buffers);
  if (window.size() < blocks) window.resize(blocks);
  const size_t group_bytes = blocks * Layout::kBlockBytes;
  for (size_t g = g_first; g < g_last; ++g) {
    const uint8_t* g0 = groups + g * group_bytes;
    for (size_t b = 0; b < blocks; ++b) Layout::unpack(g0 + b * Layout::kBlockBytes, window[b]);
    const size_t col = g * kLaneRows - row_begin;
    for (size_t t = 0; t < packed.groups; t += kLanesChunk) {
      lanes_group_chunk<Layout>(window.data(), packed, t, std::min(packed.groups, t + kLanesChunk),
                                n, y, y_stride, col);
    }
  }
  if (rest.n_tokens > 0) few(groups, row_begin, row_end, rest, y + n * y_stride, y_stride);
  _mm256_zeroupper();  // the callers may be SSE code (see attention_rows_avx2.cpp)
}

}  // namespace
}  // namespace tandem::kernels::detail
