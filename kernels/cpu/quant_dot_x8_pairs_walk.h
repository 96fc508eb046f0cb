// The walk of the x8 kernels' many-token pair tiles (two groups, 16 rows, in one 512-bit register;
// quant_dot_q45_k_x8_pairs_avx512.h, quant_dot_q6_k_x8_pairs_avx512.h,
// quant_dot_mxfp4_x8_pairs_avx512.h) over a row range and the
// tokens (and the two-group loads of the tiles), with everything outside whole pairs and whole
// tiles of four tokens left to the 256-bit kernel of the same layout. Included by files built with
// AVX-512 flags; internal linkage.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/quant_dot_q8k_x8_call.h"
#include "kernels/cpu/quant_dot_x8_walk.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kPairRows = 16;
constexpr int kPairTokens = 4;
constexpr size_t kPairMinTokens = 4;
constexpr size_t kPairSuper = 256;        // elements per Q8_K super-block
constexpr size_t kPairSumsPerBlock = 16;  // Q8_K bsums per super-block

// The activation quants p[0..3] as one 32-bit value in every lane of a 512-bit register.
[[gnu::always_inline]] inline __m512i broadcast4_512(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Two 32-byte loads, at a and b, as the low and high halves of one register.
[[gnu::always_inline]] inline __m512i load_pair(const uint8_t* a, const uint8_t* b) {
  return _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))),
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), 1);
}

// Eight fp16 values at a and eight at b as sixteen floats.
[[gnu::always_inline]] inline __m512 halves_pair(const uint8_t* a, const uint8_t* b) {
  return _mm512_cvtph_ps(_mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1));
}

// An x8 kernel's narrow form: the InterleavedDotFn of its 256-bit tiles.
using NarrowDotFn = void (*)(const uint8_t*, size_t, size_t, const ActivationRows&, float*, size_t);

// The InterleavedDotFn contract (quant_dot.h) over `groups` (group_bytes apart): whole group pairs
// inside the row range on kernel.tile(g, t0, out) (groups g and g + 1 against tokens t0 ..
// t0 + kPairTokens - 1, token t's 16 results to out[t][0 .. 16)) for every whole tile of four
// tokens, everything else through `narrow` (the 256-bit kernel of the same layout).
template <class PairKernel>
void x8_pairs_walk(const PairKernel& kernel, const uint8_t* groups, size_t row_begin,
                   size_t row_end, const ActivationRows& x, float* y, size_t y_stride,
                   NarrowDotFn narrow) {
  const size_t n = x.n_tokens;
  const size_t g_first = (row_begin + kX8GroupRows - 1) / kX8GroupRows;
  const size_t g_last = row_end / kX8GroupRows;
  if (n < kPairMinTokens || g_last < g_first + 2) {
    narrow(groups, row_begin, row_end, x, y, y_stride);
    return;
  }
  const size_t pairs = (g_last - g_first) / 2;
  const size_t pair_begin = g_first * kX8GroupRows;
  const size_t pair_end = pair_begin + pairs * kPairRows;
  // The rows before and after the pairs.
  if (row_begin < pair_begin) narrow(groups, row_begin, pair_begin, x, y, y_stride);
  if (pair_end < row_end) {
    narrow(groups, pair_end, row_end, x, y + (pair_end - row_begin), y_stride);
  }
  const size_t whole = n / kPairTokens * kPairTokens;
  const ActivationRows rest = row_range(x, whole, x.n_tokens);
  for (size_t p = 0; p < pairs; ++p) {
    const size_t g = g_first + 2 * p;
    const size_t col = g * kX8GroupRows - row_begin;
    for (size_t t0 = 0; t0 < whole; t0 += kPairTokens) {
      float* out[kPairTokens];
      for (int i = 0; i < kPairTokens; ++i) {
        out[i] = y + (t0 + static_cast<size_t>(i)) * y_stride + col;
      }
      kernel.tile(g, t0, out);
    }
    // The tokens after the last whole tile, on this pair's rows while they are in cache (a second
    // pass over the whole matrix would read it from memory again).
    if (whole < n) {
      narrow(groups, g * kX8GroupRows, (g + 2) * kX8GroupRows, rest, y + whole * y_stride + col,
             y_stride);
    }
  }
}

// x8_pairs_walk for Q8_K activations (groups of block_bytes per super-block) on
// PairTile::run(g0, g1, blocks, tokens, out).
template <class PairTile>
void x8_pairs_dot(const uint8_t* groups, size_t block_bytes, size_t row_begin, size_t row_end,
                  const ActivationRows& x, float* y, size_t y_stride, NarrowDotFn narrow) {
  struct Kernel {
    const uint8_t* groups;
    size_t group_bytes;
    size_t blocks;
    const ActivationRows* x;
    void tile(size_t g, size_t t0, float* const* out) const {
      Q8KTokens<kPairTokens> tokens;
      for (int i = 0; i < kPairTokens; ++i) {
        const size_t t = t0 + static_cast<size_t>(i);
        tokens.xq[i] = x->qs + t * x->cols;
        tokens.xd[i] = x->d + t * blocks;
        tokens.bsums[i] = x->bsums + t * blocks * kPairSumsPerBlock;
      }
      const uint8_t* g0 = groups + g * group_bytes;
      PairTile::run(g0, g0 + group_bytes, blocks, tokens, out);
    }
  };
  const size_t blocks = x.cols / kPairSuper;
  x8_pairs_walk(Kernel{groups, blocks * block_bytes, blocks, &x}, groups, row_begin, row_end, x, y,
                y_stride, narrow);
}

}  // namespace
}  // namespace tandem::kernels::detail
