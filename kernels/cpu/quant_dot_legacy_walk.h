// The walk of the legacy-type kernels (Q8_0, Q4_0, Q5_0, MXFP4, IQ4_NL x Q8_0 on plain rows) over
// rows and tokens, shared by their SIMD files (quant_dot_legacy_avx2.cpp: groups of 8 rows,
// quant_dot_legacy_avx512_vnni.cpp: 16): the activation block sums that take off the weights'
// unsigned bias, the row groups (a last partial group repeats its last row) and the token tiles of
// 8, 4, 2 and 1. Each file includes it under its own -m flags; everything here has internal
// linkage (see quant_dot_kquants_tiles.h for why).
//
// A file defines, before calling legacy_dot_rows<Fmt, Groups>, a struct Groups with
//   static constexpr size_t kRows: the rows of one group;
//   template <typename Fmt, int T> static void run(const uint8_t* const* rows, bool first,
//       size_t row_bytes, size_t blocks, const int8_t* const* xq, const float* const* xd,
//       const int32_t* const* bias, float* const* out, size_t valid):
//     the group's kRows rows (rows[i]) against T tokens (quants, scales, bias sums per block),
//     writing lanes [0, valid) to out[t][0 ..); `first`: the group's first token tile, the one
//     that streams its weights from memory (and may prefetch the next group).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/activation_rows.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kLegacyBlock = 32;
constexpr size_t kStackBiasSums = 4096;

// One group (rows p, starting at row r) against tokens [t0, t0 + T).
template <typename Fmt, typename Groups, int T>
void legacy_group_tokens(const uint8_t* const* p, size_t row_bytes, size_t r, size_t valid,
                         const ActivationRows& x, const int32_t* bias_sums, size_t t0, float* y,
                         size_t y_stride) {
  const size_t blocks = x.cols / kLegacyBlock;
  const int8_t* xq[T];
  const float* xd[T];
  const int32_t* bias[T];
  float* out[T];
  for (int i = 0; i < T; ++i) {
    const size_t t = t0 + static_cast<size_t>(i);
    xq[i] = x.qs + t * x.cols;
    xd[i] = x.d + t * blocks;
    bias[i] = bias_sums + t * blocks;
    out[i] = y + t * y_stride + r;
  }
  Groups::template run<Fmt, T>(p, t0 == 0, row_bytes, blocks, xq, xd, bias, out, valid);
}

// The QuantDotFn contract (quant_dot.h) on Groups' kernels.
template <typename Fmt, typename Groups>
void legacy_dot_rows(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride) {
  constexpr size_t kRows = Groups::kRows;
  const size_t blocks = x.cols / kLegacyBlock;
  const size_t n = x.n_tokens;
  if (rows == 0 || n == 0) return;
  // kBias * (sum of the block's activation quants), per token and block: exact in int32
  // (|sum| <= 32 * 128).
  int32_t stack_sums[kStackBiasSums];
  int32_t* bias_sums = n * blocks <= kStackBiasSums ? stack_sums : new int32_t[n * blocks];
  for (size_t i = 0; i < n * blocks; ++i) {
    const int8_t* q = x.qs + i * kLegacyBlock;
    int32_t s = 0;
    for (size_t j = 0; j < kLegacyBlock; ++j) s += q[j];
    bias_sums[i] = Fmt::kBias * s;
  }
  for (size_t r = 0; r < rows; r += kRows) {
    // Past the last row, the group repeats it (those lanes are computed and not stored).
    const uint8_t* p[kRows];
    for (size_t i = 0; i < kRows; ++i) p[i] = w + (r + i < rows ? r + i : rows - 1) * row_bytes;
    const size_t valid = rows - r < kRows ? rows - r : kRows;
    // Token tiles of 8, 4, then 3 or 2, 1 (wider tiles unpack each weight block for more tokens:
    // a last three run as one tile, not as 2 + 1, with 16 sequences decoding); only the
    // first tile streams the group from memory, so only it prefetches the next group.
    size_t t = 0;
    for (; t + 8 <= n; t += 8) {
      legacy_group_tokens<Fmt, Groups, 8>(p, row_bytes, r, valid, x, bias_sums, t, y, y_stride);
    }
    for (; t + 4 <= n; t += 4) {
      legacy_group_tokens<Fmt, Groups, 4>(p, row_bytes, r, valid, x, bias_sums, t, y, y_stride);
    }
    if (n - t == 3) {
      legacy_group_tokens<Fmt, Groups, 3>(p, row_bytes, r, valid, x, bias_sums, t, y, y_stride);
      t += 3;
    }
    for (; t + 2 <= n; t += 2) {
      legacy_group_tokens<Fmt, Groups, 2>(p, row_bytes, r, valid, x, bias_sums, t, y, y_stride);
    }
    for (; t < n; ++t) {
      legacy_group_tokens<Fmt, Groups, 1>(p, row_bytes, r, valid, x, bias_sums, t, y, y_stride);
    }
  }
  if (bias_sums != stack_sums) delete[] bias_sums;
}

}  // namespace
}  // namespace tandem::kernels::detail
