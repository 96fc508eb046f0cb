// AVX2 (+F16C) dot products of Q8_0 weights in the row-quad interleave (quant_dot.h,
// WeightLayout::kRowQuads8) with Q8_0 activations, bit-identical to the plain scalar reference
// (quant_dot_legacy_scalar.cpp).
//
// Built with -mavx2 -mfma -mf16c -ffp-contract=off but linked into binaries that run on any x86-64:
// everything except the exported function has internal linkage (the included helpers too), so no
// AVX2 code can be picked by the linker for a caller on another CPU.
//
// Technique: rows in the lanes. A group's block holds its 32 quants as 8 quads, each quad's eight
// rows side by side (32 bytes: row i's elements 4k .. 4k + 3 in 32-bit lane i). A token's quad k is
// broadcast to all lanes; |w| times the broadcast with w's sign (maddubs; |q| <= 128 and
// |x| <= 127, so the pair sums <= 2 * 128 * 127 never saturate), widened to int32 by madd with
// ones, gives every row's 4-element sum in its own lane, and the 8 quads add to the exact block
// sums with no reduction across lanes. Then, lane-wise and in block order, term = float(isum) * (dw
// * dx) and acc = acc + term as separate instructions: the scalar reference's float operations. The
// block interleave's 8-row tiles (quant_dot_legacy_avx2.cpp) assemble each row pair with an insert
// and reduce across lanes with three hadds per block and token; on a third-generation Zen EPYC
// this form runs 1.76x / 1.47x / 1.25x / 1.3x / 1.15x faster with 1 / 2 / 3 / 4 / 8 tokens
// (docs/benchmarks.md).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/avx2_store_lanes.h"
#include "kernels/cpu/prefetch_ahead.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/simd_chain.h"

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
template <int kTokens>
void group_tile(const uint8_t* group, size_t blocks, bool prefetch, const int8_t* const xq[kTokens],
                const float* const xd[kTokens], float* const out[kTokens], size_t lane_begin,
                size_t lane_end) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) acc[t] = _mm256_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* block = group + b * kBlockBytes;
    if (prefetch) prefetch_ahead(block, kAhead, kBlockBytes);
    __m256i isum[kTokens];
#pragma GCC unroll 8
    for (size_t k = 0; k < kQuads; ++k) {
      const __m256i w =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kScaleBytes + 32 * k));
      const __m256i magnitude = _mm256_abs_epi8(w);
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) {
        const __m256i x = _mm256_set1_epi32(load_i32(xq[t] + b * kBlockElements + 4 * k));
        const __m256i quad =
            _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(x, w)), ones);
        // In program order (simd_chain.h): reassociated into a tree, the 4-token tile computed all
        // 32 quad sums of a block first and spilled them (llvm-mca, Zen 3: 50.6 -> 48.1 cycles a
        // block).
        isum[t] = k == 0 ? quad : chain_barrier(_mm256_add_epi32(isum[t], quad));
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
void group_tokens(const uint8_t* group, size_t t0, const ActivationRows& x, float* y,
                  size_t y_stride, size_t column, size_t lane_begin, size_t lane_end) {
  const size_t blocks = x.cols / kBlockElements;
  const int8_t* xq[kTokens];
  const float* xd[kTokens];
  float* out[kTokens];
  for (int i = 0; i < kTokens; ++i) {
    const size_t t = t0 + static_cast<size_t>(i);
    xq[i] = x.qs + t * x.cols;
    xd[i] = x.d + t * blocks;
    out[i] = y + t * y_stride + column;
  }
  group_tile<kTokens>(group, blocks, t0 == 0, xq, xd, out, lane_begin, lane_end);
}

}  // namespace

void dot_q8_0_quads_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                         const ActivationRows& x, float* y, size_t y_stride) {
  const size_t n = x.n_tokens;
  if (row_begin >= row_end || n == 0) return;
  const size_t group_bytes = x.cols / kBlockElements * kBlockBytes;
  for (size_t r = row_begin / kGroupRows * kGroupRows; r < row_end; r += kGroupRows) {
    const uint8_t* group = groups + r / kGroupRows * group_bytes;
    const size_t first_row = r < row_begin ? row_begin : r;
    const size_t lane_begin = first_row - r;
    const size_t lane_end = row_end - r < kGroupRows ? row_end - r : kGroupRows;
    const size_t column = first_row - row_begin;
    // Token tiles of 4, then 3, 2 or 1. No tile of 8: its sums and accumulators do not fit the
    // sixteen registers (llvm-mca's Zen 3 model: 106.5 cycles a block against 2 x 50.6 for two
    // tiles of 4).
    size_t t = 0;
    while (t + 4 <= n) {
      group_tokens<4>(group, t, x, y, y_stride, column, lane_begin, lane_end);
      t += 4;
    }
    if (n - t == 3) {
      group_tokens<3>(group, t, x, y, y_stride, column, lane_begin, lane_end);
    } else if (n - t == 2) {
      group_tokens<2>(group, t, x, y, y_stride, column, lane_begin, lane_end);
    } else if (n - t == 1) {
      group_tokens<1>(group, t, x, y, y_stride, column, lane_begin, lane_end);
    }
  }
}

}  // namespace tandem::kernels::detail
