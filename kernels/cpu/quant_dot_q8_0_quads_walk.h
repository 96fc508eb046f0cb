// The tiles and the row walk of the Q8_0 row-quad kernels (quant_dot.h, WeightLayout::kRowQuads8),
// shared by quant_dot_q8_0_quads_avx2.cpp and quant_dot_q8_0_quads_avx512_vnni.cpp; each includes
// it under its own -m flags after defining its Isa (below). Everything here has internal linkage
// (see quant_dot_kquants_tiles.h for why).
//
// Technique: rows in the lanes. A group's block holds its 32 quants as 8 quads, each quad's eight
// rows side by side (32 bytes: row i's elements 4k .. 4k + 3 in 32-bit lane i). A token's quad k is
// broadcast to all lanes; the quad's four products summed (Isa::add_quad) give every row's
// 4-element sum in its own lane, and the 8 quads
// add to the exact block sums with no reduction across lanes. Then, lane-wise and in block order,
// term = float(isum) * (dw * dx) and acc = acc + term as separate instructions: the scalar
// reference's float operations, so every variant gives its bits.
//
// The including file defines, before including this header:
//   struct Isa {
//     static constexpr bool kPrefetch;   // a group's first tile prefetches kAhead bytes ahead
//     static constexpr bool kBiased;     // the quads are summed as (w + 128) * x (below)
//     // isum + the four-product sums of w and the token's broadcast quad x, per 32-bit lane, from
//     // the quad's bytes w and prepared = Isa::prepare(w) (isum is zero at k == 0, so a variant
//     // may skip the add there). Without kBiased: the products w * x themselves; with it, the
//     // products (w + 128) * x, and the walk subtracts 128 * (the block's sum of x) after the
//     // eight quads, which gives the same exact sums.
//     static __m256i prepare(__m256i w);
//     static __m256i add_quad(__m256i isum, __m256i prepared, __m256i w, __m256i x, size_t k);
//   };
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

#include "kernels/cpu/avx2_store_lanes.h"
#include "kernels/cpu/prefetch_ahead.h"
#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kGroupRows = 8;
constexpr size_t kBlockElements = 32;
constexpr size_t kQuads = kBlockElements / 4;
constexpr size_t kScaleBytes = kGroupRows * 2;  // eight f16 scales
constexpr size_t kBlockBytes = kQ8_0QuadBlockBytes;
static_assert(kBlockBytes == kScaleBytes + kGroupRows * kQuads * 4,
              "scales, then 8 quads of 8 rows");
// Software prefetch distance of the tiles that stream a group (prefetch_ahead.h).
constexpr size_t kAhead = 2048;

// The 32-bit value at p (any alignment).
int32_t load_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// One group's blocks against kTokens tokens (quants xq[t], block scales xd[t]); lane r of token
// t's result is row r's dot product; lanes [lane_begin, lane_end) are stored at out[t].
// With Isa::kBiased, xs[t][b] is token t's sum of block b's quants (null otherwise).
template <int kTokens>
void group_tile(const uint8_t* group, size_t blocks, bool prefetch, const int8_t* const xq[kTokens],
                const float* const xd[kTokens], const int32_t* const xs[kTokens],
                float* const out[kTokens], size_t lane_begin, size_t lane_end) {
  __m256 acc[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) acc[t] = _mm256_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* block = group + b * kBlockBytes;
    if (Isa::kPrefetch && prefetch) prefetch_ahead(block, kAhead, kBlockBytes);
    __m256i isum[kTokens];
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (size_t k = 0; k < kQuads; ++k) {
      const __m256i w =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kScaleBytes + 32 * k));
      const __m256i prepared = Isa::prepare(w);
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) {
        const __m256i x = _mm256_set1_epi32(load_i32(xq[t] + b * kBlockElements + 4 * k));
        isum[t] = Isa::add_quad(isum[t], prepared, w, x, k);
      }
    }
    if constexpr (Isa::kBiased) {
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) {
        isum[t] = _mm256_sub_epi32(isum[t], _mm256_set1_epi32(128 * xs[t][b]));
      }
    }
    // vcvtph2ps is exact for every half.
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block)));
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) {
      const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(xd[t][b]));
      acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(_mm256_cvtepi32_ps(isum[t]), scale));
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) avx2_store_lanes(out[t], acc[t], lane_begin, lane_end);
}

// Tokens [t0, t0 + kTokens) against one group; only the group's first tile streams it from memory,
// so only that one prefetches.
template <int kTokens>
void group_tokens(const uint8_t* group, size_t t0, const ActivationRows& x, const int32_t* sums,
                  float* y, size_t y_stride, size_t column, size_t lane_begin, size_t lane_end) {
  const size_t blocks = x.cols / kBlockElements;
  const int8_t* xq[kTokens];
  const float* xd[kTokens];
  const int32_t* xs[kTokens];
  float* out[kTokens];
  for (int i = 0; i < kTokens; ++i) {
    const size_t t = t0 + static_cast<size_t>(i);
    xq[i] = x.qs + t * x.cols;
    xd[i] = x.d + t * blocks;
    xs[i] = sums == nullptr ? nullptr : sums + t * blocks;
    out[i] = y + t * y_stride + column;
  }
  group_tile<kTokens>(group, blocks, t0 == 0, xq, xd, xs, out, lane_begin, lane_end);
}

// With Isa::kBiased: every token's block sums of x's quants (token t's block b at t * blocks + b)
// in this thread's buffer, once per call (n_tokens * cols adds against the call's rows * n_tokens
// * cols multiply-adds); else null.
const int32_t* block_sums(const ActivationRows& x) {
  if constexpr (!Isa::kBiased) {
    return nullptr;
  } else {
    struct Delete {
      void operator()(int32_t* p) const { ::operator delete[](p); }
    };
    thread_local std::unique_ptr<int32_t[], Delete> buffer;
    thread_local size_t capacity = 0;
    const size_t blocks = x.cols / kBlockElements;
    const size_t n = x.n_tokens * blocks;
    if (capacity < n) {
      buffer.reset(static_cast<int32_t*>(::operator new[](n * sizeof(int32_t))));
      capacity = n;
    }
    for (size_t i = 0; i < n; ++i) {
      const int8_t* q = x.qs + i * kBlockElements;
      int32_t sum = 0;
      for (size_t j = 0; j < kBlockElements; ++j) sum += q[j];
      buffer[i] = sum;
    }
    return buffer.get();
  }
}

// The InterleavedDotFn contract (quant_dot.h) on the row quads: group by group, token tiles of 4,
// then one of 3, 2 or 1. No tile of 8: on AVX2 its sums and accumulators do not fit the sixteen
// registers (llvm-mca's Zen 3 model: 106.5 cycles a block against 2 x 50.6 for two tiles of 4);
// with AVX-512's 32 it ran at 101-132 GFLOP/s on a Zen 4 thread in cache where tiles of 4 run at
// 198-216 (8 to 128 tokens).
void quads_dot(const uint8_t* groups, size_t row_begin, size_t row_end, const ActivationRows& x,
               float* y, size_t y_stride) {
  const size_t n = x.n_tokens;
  if (row_begin >= row_end || n == 0) return;
  const size_t group_bytes = x.cols / kBlockElements * kBlockBytes;
  const int32_t* sums = block_sums(x);
  for (size_t r = row_begin / kGroupRows * kGroupRows; r < row_end; r += kGroupRows) {
    const uint8_t* group = groups + r / kGroupRows * group_bytes;
    const size_t first_row = r < row_begin ? row_begin : r;
    const size_t lane_begin = first_row - r;
    const size_t lane_end = row_end - r < kGroupRows ? row_end - r : kGroupRows;
    const size_t column = first_row - row_begin;
    size_t t = 0;
    for (; t + 4 <= n; t += 4) {
      group_tokens<4>(group, t, x, sums, y, y_stride, column, lane_begin, lane_end);
    }
    if (n - t == 3) {
      group_tokens<3>(group, t, x, sums, y, y_stride, column, lane_begin, lane_end);
    } else if (n - t == 2) {
      group_tokens<2>(group, t, x, sums, y, y_stride, column, lane_begin, lane_end);
    } else if (n - t == 1) {
      group_tokens<1>(group, t, x, sums, y, y_stride, column, lane_begin, lane_end);
    }
  }
}

}  // namespace
}  // namespace tandem::kernels::detail
