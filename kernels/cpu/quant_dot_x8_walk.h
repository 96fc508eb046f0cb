// The walk of the interleaved x8 kernels (quant_dot.h, WeightLayout::kInterleaved8) over a row
// range and the tokens, shared by their SIMD files: which tiles of one group x T tokens run, where
// each tile's lanes go, and the lane helpers. Each kernel file includes it under its own -m flags;
// everything here has internal linkage (an anonymous namespace), so no SIMD code is shared with
// callers on other CPUs (see quant_dot_kquants_tiles.h).
//
// Before including this header a file may rely only on <immintrin.h> being included by it.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/prefetch_ahead.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kX8GroupRows = 8;

// The activation quants p[0..3] as one 32-bit value in every lane.
[[gnu::always_inline]] inline __m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Expanded activations. Where a broadcast from memory takes a slot of the vector pipes that the
// multiplies need (a first-generation Zen), a call of a few tokens may instead copy its quants
// once with each quad (4 quants) in all eight 32-bit lanes, and its tiles load those 32 bytes:
// the copy, 8 bytes per quant and at most kExpandBytes, is read by every group of the call's row
// range from L1 or L2. A kernel opts in with kExpandTokens.
// How many tokens a call of Tile expands at most (Tile::kExpandTokens; 0: none).
template <class Tile>
constexpr size_t expand_tokens() {
  if constexpr (requires { Tile::kExpandTokens; }) {
    return Tile::kExpandTokens;
  } else {
    return 0;
  }
}
constexpr size_t kExpandBytes = size_t{128} << 10;

// This thread's buffer for expanded quants, at least `bytes` long and 64-byte aligned.
inline int8_t* expanded_buffer(size_t bytes) {
  struct AlignedDelete {
    void operator()(int8_t* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  thread_local std::unique_ptr<int8_t[], AlignedDelete> buffer;
  thread_local size_t capacity = 0;
  if (capacity < bytes) {
    buffer.reset(static_cast<int8_t*>(::operator new[](bytes, std::align_val_t{64})));
    capacity = bytes;
  }
  return buffer.get();
}

// x's quants expanded into out (quad k of the call's quants at out + 32 * k): 8 * n_tokens * cols
// bytes.
inline void expand_quants(const ActivationRows& x, int8_t* out) {
  const size_t quads = x.n_tokens * x.cols / 4;
  for (size_t k = 0; k < quads; ++k) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 32 * k), broadcast4(x.qs + 4 * k));
  }
}

// Stores lanes [lane_begin, lane_end) of v to out[0 ..).
[[gnu::always_inline]] inline void store_lanes(__m256 v, float* out, size_t lane_begin,
                                               size_t lane_end) {
  if (lane_begin == 0 && lane_end == kX8GroupRows) {
    _mm256_storeu_ps(out, v);
    return;
  }
  float lanes[kX8GroupRows];
  _mm256_storeu_ps(lanes, v);
  for (size_t i = lane_begin; i < lane_end; ++i) out[i - lane_begin] = lanes[i];
}

// One call of an InterleavedDotFn: the groups (group_bytes apart, `blocks` blocks each), the row
// range, the token count and the outputs.
struct X8Call {
  const uint8_t* groups;
  size_t group_bytes;
  size_t blocks;
  size_t row_begin;
  size_t row_end;
  size_t n_tokens;
  float* y;
  size_t y_stride;
};

// Where a tile of group g x tokens [t0, t0 + T) stores: token t's lanes [lane_begin, lane_end)
// go to out[t][0 ..).
template <int T>
struct X8Outputs {
  float* out[T];
  size_t lane_begin;
  size_t lane_end;
};

template <int T>
X8Outputs<T> x8_outputs(const X8Call& c, size_t g, size_t t0) {
  X8Outputs<T> y;
  const size_t r0 = g * kX8GroupRows;
  y.lane_begin = c.row_begin > r0 ? c.row_begin - r0 : 0;
  y.lane_end = c.row_end - r0 < kX8GroupRows ? c.row_end - r0 : kX8GroupRows;
  for (int i = 0; i < T; ++i) {
    y.out[i] = c.y + (t0 + static_cast<size_t>(i)) * c.y_stride + (r0 + y.lane_begin - c.row_begin);
  }
  return y;
}

// The whole call, one group at a time (a group's first and last may be partial: only the lanes in
// [row_begin, row_end) are stored): per group, tiles of K::kMaxTokens (8 or 4), then 4, then 3
// (a last three: with 16 sequences decoding, about a fifth of the touched experts) or 2 and 1
// tokens, each block unpacked once and used by every token of its tile;
// `kernel.template tile<T>(g, t0, y)` runs one. One group per tile streams best: a tile of
// four groups x one token, which shares each activation broadcast among the groups, read a
// 256 MiB Q4_K matrix at 22.6 GB/s on one Zen 4 thread where single groups read 38.5 (MXFP4:
// 29.7 -> 32.7), and was slower in cache too. Walking one group after the other reads the call's
// bytes in one sequential run, which the hardware prefetchers follow; prefetching the next group
// at the same offset (into L1 for Q4_K, L2 for MXFP4) cost streaming speed on a Zen 4 (one thread,
// 256 MiB, one token: Q4_K 15-18 -> 24-26 GB/s, MXFP4 9-11 -> 22-27 GB/s without; a plain read 24
// GB/s), so the AVX-512 VNNI tiles issue no software prefetches. The AVX2 tiles of up to 4 tokens
// prefetch each block's bytes 2 KiB ahead (prefetch_ahead.h): on a first-generation Zen EPYC,
// whose hardware prefetchers left them at 70-80 % of their in-cache rate, one token streamed
// 256 MiB at Q8_0 6.1 -> 8.9-9.4, Q5_K 6.0-6.1 -> 6.9-7.3, Q6_K 6.9-7.4 -> 7.3-8.3 and MXFP4
// 7.0-7.3 -> 7.6-7.7 GB/s per thread (Q4_K 7.7-7.9 -> 7.7-8.3).
template <typename K>
void x8_walk(const X8Call& c, const K& kernel) {
  if (c.row_begin >= c.row_end || c.n_tokens == 0) return;
  const size_t n = c.n_tokens;
  const size_t g_end = (c.row_end + kX8GroupRows - 1) / kX8GroupRows;
  for (size_t g = c.row_begin / kX8GroupRows; g < g_end; ++g) {
    size_t u = 0;
    if constexpr (K::kMaxTokens == 8) {
      for (; u + 8 <= n; u += 8) kernel.template tile<8>(g, u, x8_outputs<8>(c, g, u));
    }
    for (; u + 4 <= n; u += 4) kernel.template tile<4>(g, u, x8_outputs<4>(c, g, u));
    if (n - u == 3) {
      kernel.template tile<3>(g, u, x8_outputs<3>(c, g, u));
      u += 3;
    }
    for (; u + 2 <= n; u += 2) kernel.template tile<2>(g, u, x8_outputs<2>(c, g, u));
    for (; u < n; ++u) kernel.template tile<1>(g, u, x8_outputs<1>(c, g, u));
  }
}

// The walk of one call whose tiles may read expanded activations: where Tile expands calls of
// x.n_tokens and the copy fits kExpandBytes, x's quants are expanded once into this thread's
// buffer and the walk runs make_kernel(std::true_type{}, copy), else make_kernel(std::false_type{},
// nullptr).
template <class Tile, class MakeKernel>
void x8_walk_expanded(const X8Call& c, const ActivationRows& x, const MakeKernel& make_kernel) {
  if constexpr (expand_tokens<Tile>() > 0) {
    const size_t bytes = 8 * x.n_tokens * x.cols;
    if (x.n_tokens <= expand_tokens<Tile>() && bytes <= kExpandBytes && c.row_begin < c.row_end) {
      int8_t* expanded = expanded_buffer(bytes);
      expand_quants(x, expanded);
      x8_walk(c, make_kernel(std::true_type{}, expanded));
      return;
    }
  }
  x8_walk(c, make_kernel(std::false_type{}, nullptr));
}

}  // namespace
}  // namespace tandem::kernels::detail
