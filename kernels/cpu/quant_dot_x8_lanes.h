// Tokens in the lanes: the many-token (prefill) walk of the Q8_K-activation kernels, on the x8
// layouts (Q4_K, Q5_K, Q6_K; quant_dot.h) and on plain rows (Q2_K, Q3_K, IQ4_XS, the grid
// i-quants), bit-identical to the scalar references. This file holds what every instruction set
// shares: the unpacked window of eight rows' super-block, the tokens' per-super-block sums and
// scales, and the call frames. The registers and the arithmetic are per instruction set
// (quant_dot_x8_lanes_avx512.h: 16 tokens per register, vpdpbusd; quant_dot_x8_lanes_avx2.h: 8,
// maddubs); each weight layout brings its unpacking (quant_dot_q45_k_x8_lanes.h,
// quant_dot_q6_k_x8_lanes.h, quant_dot_q23_k_lanes.h, quant_dot_iq4_xs_lanes.h,
// quant_dot_iquants_lanes.h). AVX2-level code with internal linkage, included by the kernel files
// under their own -m flags.
//
// Technique. The x8 tiles put one weight row in each 32-bit lane and broadcast four activation
// quants per step, so every token's four quants cost a broadcast and every few tokens unpack the
// weights again. Here one register holds the same four quants of many tokens (packed once per
// call: a transpose of 32-bit units), eight rows' weights are unpacked once per call into a window
// of signed bytes in the same order (quad k, row i: row i's elements 4k .. 4k + 3), and each step
// multiplies all the register's tokens by one row's four weights, broadcast from the window. The
// int8 instructions take one operand unsigned: the activation quants go in plus 128, the weights
// signed, and the extra 128 * sum_s scale_s * (sum of scale group s's weights) is a per-row
// constant of the super-block (`bias`) that each row's sum starts below. Per scale group (32 or 16
// elements, or the whole super-block where the layout premultiplies its scales) the group's int32
// sum times the row's scale goes into isum; per super-block, lane-wise, the reference's float terms
// (with imin = sum_j min_j * (bsums[2j] + bsums[2j + 1]), or Q2_K's sum_j min_j * bsums[j], where
// the type has mins) are added to the token's sum. Every integer is exact: a group's sum of
// w * (x + 128) is at most 32 * 127 * 255 (IQ4_XS, the largest weights), times a scale of at most
// 32 and summed over the super-block it stays below 2^29; each layout states its own bound.
//
// Calls of fewer than Isa::kMinTokens tokens keep the instruction set's other tiles (a kernel file
// may ask for more). Tokens after the last whole register are padded when at least
// Isa::kPadTokens remain (any, for a layout with kPadAll), else go to the few-token kernel after
// the lanes; rows outside whole groups go to the narrow kernel (x8) or the few-token one (rows).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kLaneRows = 8;     // rows of an x8 group
constexpr size_t kLaneSuper = 256;  // elements per Q8_K super-block
constexpr size_t kLaneQuads = 64;   // four-element units per super-block
constexpr size_t kLaneBsums = 16;   // Q8_K bsums per super-block

// One super-block of a group, unpacked for the lanes by the layout's unpack. Scale group s covers
// quads k with k / Layout::kScaleQuads == s.
struct alignas(64) LaneBlock {
  int8_t q[kLaneQuads][kLaneRows][4];  // quad k, row i: row i's elements 4k .. 4k + 3
  int32_t sc[16][kLaneRows];           // row i's scale of scale group s
  int32_t mins[8][kLaneRows];          // layouts with mins: row i's pair c of mins, int16 halves
  int32_t bias[kLaneRows];             // 128 * sum_s sc_s * (sum of group s's weights)
  float dw[kLaneRows];
  float dmin[kLaneRows];  // layouts with mins
};

// acc plus, per 32-bit lane (row), the sum of the four signed bytes w holds there.
[[gnu::always_inline]] inline __m256i add_lane_bytes(__m256i acc, __m256i w) {
  const __m256i sums16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), w);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(sums16, _mm256_set1_epi16(1)));
}

// The tokens' per-super-block values in lanes of kTokens (one aligned unit per register):
//  pairs[(g * blocks + b) * min_pairs + c]: lane l = token kTokens * g + l's pair c of activation
//                                   sums as int16 halves: with 4 pairs (min_2c, min_2c+1 of
//                                   32-element sub-blocks), (S_2c, S_2c+1), S_j = bsums[2j] +
//                                   bsums[2j + 1]; with 8 (mins of 16-element groups, Q2_K),
//                                   (bsums[2c], bsums[2c + 1]); none for types without mins;
//  d[g * blocks + b]:               lane l = that token's scale of super-block b.
// Lanes past the packed tokens hold 0.
template <size_t kTokens>
struct alignas(64) LaneInts {
  int32_t v[kTokens];
};
template <size_t kTokens>
struct alignas(64) LaneFloats {
  float v[kTokens];
};

template <size_t kTokens>
void pack_lane_sums(const ActivationRows& x, size_t t0, size_t live, size_t blocks,
                    size_t min_pairs, LaneInts<kTokens>* pairs, LaneFloats<kTokens>* d) {
  for (size_t b = 0; b < blocks; ++b) {
    for (size_t c = 0; c < min_pairs; ++c) pairs[b * min_pairs + c] = LaneInts<kTokens>{};
    d[b] = LaneFloats<kTokens>{};
    for (size_t l = 0; l < live; ++l) {
      const size_t t = t0 + l;
      const int16_t* bs = x.bsums + (t * blocks + b) * kLaneBsums;
      for (size_t c = 0; c < min_pairs; ++c) {
        const auto s0 =
            static_cast<uint16_t>(min_pairs == 8 ? bs[2 * c] : bs[4 * c] + bs[4 * c + 1]);
        const auto s1 =
            static_cast<uint16_t>(min_pairs == 8 ? bs[2 * c + 1] : bs[4 * c + 2] + bs[4 * c + 3]);
        pairs[b * min_pairs + c].v[l] = static_cast<int32_t>(s0 | (uint32_t{s1} << 16));
      }
      d[b].v[l] = x.d[t * blocks + b];
    }
  }
}

// The call's activations in lanes (packed by the instruction set's pack_lane_tokens):
//  qs[g * quads + k]: lane l = token kTokens * g + l's quants 4k .. 4k + 3, each plus 128
//  (128 in lanes past the packed tokens); pairs and d as pack_lane_sums.
template <size_t kTokens>
struct LaneTokens {
  const LaneInts<kTokens>* qs;
  const LaneInts<kTokens>* pairs;
  const LaneFloats<kTokens>* d;
  size_t groups;     // registers of kTokens tokens
  size_t blocks;     // super-blocks per row
  size_t min_pairs;  // pairs per super-block (0, 4 or 8)
};

template <size_t kTokens>
struct LaneBuffers {
  std::vector<LaneInts<kTokens>> qs;
  std::vector<LaneInts<kTokens>> pairs;
  std::vector<LaneFloats<kTokens>> d;
};

// The calling thread's buffers (one set per including file: internal linkage).
template <size_t kTokens>
LaneBuffers<kTokens>& lane_buffers() {
  thread_local LaneBuffers<kTokens> buffers;
  return buffers;
}
inline std::vector<LaneBlock>& lane_window() {
  thread_local std::vector<LaneBlock> window;
  return window;
}

// The first n tokens of x in lanes of Isa::kTokens: Isa::pack_quads(x, t0, live, k0, out) writes
// out[i] (i < kTokens): lane l = token t0 + l's quad k0 + i plus 128, for l < live, else 128.
template <class Isa>
LaneTokens<Isa::kTokens> pack_lane_tokens(const ActivationRows& x, size_t n, size_t min_pairs,
                                          LaneBuffers<Isa::kTokens>& buf) {
  constexpr size_t kTokens = Isa::kTokens;
  const size_t blocks = x.cols / kLaneSuper;
  const size_t quads = blocks * kLaneQuads;
  const size_t groups = (n + kTokens - 1) / kTokens;
  if (buf.qs.size() < groups * quads) buf.qs.resize(groups * quads);
  if (buf.pairs.size() < groups * blocks * min_pairs) buf.pairs.resize(groups * blocks * min_pairs);
  if (buf.d.size() < groups * blocks) buf.d.resize(groups * blocks);
  for (size_t g = 0; g < groups; ++g) {
    const size_t t0 = g * kTokens;
    const size_t live = std::min(kTokens, n - t0);
    for (size_t k0 = 0; k0 < quads; k0 += kTokens) {
      Isa::pack_quads(x, t0, live, k0, buf.qs.data() + g * quads + k0);
    }
    pack_lane_sums(x, t0, live, blocks, min_pairs, buf.pairs.data() + g * blocks * min_pairs,
                   buf.d.data() + g * blocks);
  }
  return LaneTokens<kTokens>{buf.qs.data(), buf.pairs.data(), buf.d.data(),
                             groups,        blocks,           min_pairs};
}

// How many of n_tokens tokens the lanes take: whole registers, and a last partial one of at least
// Isa::kPadTokens, or of any size where the layout says kPadAll (its few-token kernel is much
// slower than padding).
template <class Isa, class Layout>
size_t lanes_token_count(size_t n_tokens) {
  static_assert(Isa::kPadTokens <= Isa::kMinTokens, "the tokens left over take the few kernel");
  constexpr bool kPadAll = requires {
    Layout::kPadAll;
  };
  const size_t pad = kPadAll ? 1 : Isa::kPadTokens;
  return n_tokens % Isa::kTokens >= pad ? n_tokens : n_tokens / Isa::kTokens * Isa::kTokens;
}

// Tokens [0, n) of x against n_groups groups of 8 rows: unpack(g, b, window) unpacks super-block b
// of group g; row r of group g goes to y[t * y_stride + 8g + r]. Isa: kTokens (per register),
// kChunk (registers per pass over a window), pack_quads (pack_lane_tokens) and
// chunk<Layout>(window, tokens, g0, g1, n, y, y_stride, col) for token registers [g0, g1). Layout:
// kScaleQuads (quads per scale: 8 or 4), kMinPairs (0: no mins; 4: a min per 32 elements; 8: one
// per 16), kMaxWeight and the unpacking that `unpack` runs.
template <class Isa, class Layout, class Unpack>
void lanes_groups(const Unpack& unpack, size_t n_groups, const ActivationRows& x, size_t n,
                  float* y, size_t y_stride) {
  const size_t blocks = x.cols / kLaneSuper;
  // One set of buffers per thread and instruction-set file, whatever the layout: they grow to the
  // largest call (the packed tokens are as large as the call's activation quants).
  LaneBuffers<Isa::kTokens>& buffers = lane_buffers<Isa::kTokens>();
  std::vector<LaneBlock>& window = lane_window();
  const LaneTokens<Isa::kTokens> packed = pack_lane_tokens<Isa>(x, n, Layout::kMinPairs, buffers);
  if (window.size() < blocks) window.resize(blocks);
  for (size_t g = 0; g < n_groups; ++g) {
    for (size_t b = 0; b < blocks; ++b) unpack(g, b, window[b]);
    for (size_t t = 0; t < packed.groups; t += Isa::kChunk) {
      Isa::template chunk<Layout>(window.data(), packed, t,
                                  std::min(packed.groups, t + Isa::kChunk), n, y, y_stride,
                                  g * kLaneRows);
    }
  }
}

// The InterleavedDotFn contract (quant_dot.h) with the tokens in the lanes, for a call of at least
// Isa::kMinTokens tokens (Layout::unpack(block, window) unpacks a group's super-block; kBlockBytes
// its size). narrow: the layout's kernel for rows outside whole groups; few: for the tokens the
// lanes leave (lanes_token_count).
template <class Isa, class Layout>
void x8_lanes_dot(const uint8_t* groups, size_t row_begin, size_t row_end, const ActivationRows& x,
                  float* y, size_t y_stride, InterleavedDotFn narrow, InterleavedDotFn few) {
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
  const size_t n = lanes_token_count<Isa, Layout>(x.n_tokens);
  const size_t group_bytes = x.cols / kLaneSuper * Layout::kBlockBytes;
  const uint8_t* first = groups + g_first * group_bytes;
  const auto unpack = [first, group_bytes](size_t g, size_t b, LaneBlock& window) {
    Layout::unpack(first + g * group_bytes + b * Layout::kBlockBytes, window);
  };
  float* out = y + (begin - row_begin);
  lanes_groups<Isa, Layout>(unpack, g_last - g_first, x, n, out, y_stride);
  if (n < x.n_tokens)
    few(groups, begin, end, row_range(x, n, x.n_tokens), out + n * y_stride, y_stride);
  _mm256_zeroupper();  // the callers may be SSE code (see attention_rows_avx2.cpp)
}

// The QuantDotFn contract (quant_dot.h) on plain rows with the tokens in the lanes, for a call of
// at least Isa::kMinTokens tokens: whole groups of 8 rows (Layout::unpack_rows(row 0 of the group,
// row_bytes, super-block b, window)); the rows after them and the tokens the lanes leave go to few.
template <class Isa, class Layout>
void rows_lanes_dot(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                    float* y, size_t y_stride, QuantDotFn few) {
  const size_t whole = rows / kLaneRows * kLaneRows;
  if (whole == 0) {
    few(w, row_bytes, rows, x, y, y_stride);
    return;
  }
  if (whole < rows) few(w + whole * row_bytes, row_bytes, rows - whole, x, y + whole, y_stride);
  const size_t n = lanes_token_count<Isa, Layout>(x.n_tokens);
  const auto unpack = [w, row_bytes](size_t g, size_t b, LaneBlock& window) {
    Layout::unpack_rows(w + g * kLaneRows * row_bytes, row_bytes, b, window);
  };
  lanes_groups<Isa, Layout>(unpack, whole / kLaneRows, x, n, y, y_stride);
  if (n < x.n_tokens)
    few(w, row_bytes, whole, row_range(x, n, x.n_tokens), y + n * y_stride, y_stride);
  _mm256_zeroupper();  // the callers may be SSE code (see attention_rows_avx2.cpp)
}

// r[i] = column i of the 8 x 8 matrix of 32-bit units whose rows are r[0 .. 8).
[[gnu::always_inline]] inline void transpose8x8_epi32(__m256i* r) {
  __m256i t[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // u[4h + j]: units j and 4 + j of rows 4h .. 4h + 3.
  __m256i u[8];
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
    u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
    r[4 + j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
  }
}

// The window's quads, weight sums and bias from eight rows' super-block of signed weights in
// element order (vals[i]: row i), once p.sc holds the rows' scales per group of scale_quads quads.
[[gnu::always_inline]] inline void lanes_window_from_rows(const int8_t (*vals)[kLaneSuper],
                                                          size_t scale_quads, LaneBlock& p) {
  __m256i wsum[16];
#pragma GCC unroll 16
  for (size_t s = 0; s < 16; ++s) wsum[s] = _mm256_setzero_si256();
  for (size_t kb = 0; kb < kLaneQuads / 8; ++kb) {
    // Eight quads of the eight rows, transposed into the window's quad-major order.
    __m256i r[kLaneRows];
#pragma GCC unroll 8
    for (size_t i = 0; i < kLaneRows; ++i) {
      r[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(vals[i] + 32 * kb));
    }
    transpose8x8_epi32(r);
#pragma GCC unroll 8
    for (size_t j = 0; j < 8; ++j) {
      const size_t quad = 8 * kb + j;
      _mm256_store_si256(reinterpret_cast<__m256i*>(p.q[quad]), r[j]);
      wsum[quad / scale_quads] = add_lane_bytes(wsum[quad / scale_quads], r[j]);
    }
  }
  __m256i bias = _mm256_setzero_si256();
  for (size_t s = 0; s < kLaneQuads / scale_quads; ++s) {
    const __m256i sc = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.sc[s]));
    bias = _mm256_add_epi32(bias, _mm256_mullo_epi32(sc, wsum[s]));
  }
  _mm256_store_si256(reinterpret_cast<__m256i*>(p.bias), _mm256_slli_epi32(bias, 7));
}

// Writes the sums of token register g (sum[r]: row r's lanes) to y[t * y_stride + col + r] for
// its tokens below n.
template <size_t kTokens>
[[gnu::always_inline]] inline void store_lane_sums(const LaneFloats<kTokens>* sum, size_t g,
                                                   size_t n, float* y, size_t y_stride,
                                                   size_t col) {
  const size_t live = std::min(kTokens, n - g * kTokens);
  for (size_t l = 0; l < live; ++l) {
    float* dst = y + (g * kTokens + l) * y_stride + col;
    for (size_t r = 0; r < kLaneRows; ++r) dst[r] = sum[r].v[l];
  }
}

}  // namespace
}  // namespace tandem::kernels::detail
