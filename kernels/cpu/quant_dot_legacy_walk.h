// The walk of the legacy-type kernels (Q8_0, Q4_0, Q5_0, MXFP4, IQ4_NL x Q8_0 on plain rows, and
// Q8_0, Q4_0, Q5_0, IQ4_NL on their x8 block interleave) over rows and tokens, shared by their SIMD
// files (quant_dot_legacy_avx2.cpp: groups of 8 rows, quant_dot_legacy_avx512_vnni.cpp: 16): the
// activation block sums that take off the weights' unsigned bias, the row groups (a last partial
// group repeats its last row) and the token tiles of 8, 4, 2 and 1. Each file includes it under its
// own -m flags; everything here has internal linkage (see quant_dot_kquants_tiles.h for why).
//
// A file defines, before calling legacy_dot_rows<Fmt, Groups> (plain rows) or
// legacy_dot_x8<Fmt, Groups> (the x8 block interleave), a struct Groups with
//   static constexpr size_t kRows: the rows of one group;
//   template <typename Fmt, int T> static void run(const uint8_t* const* rows, bool first,
//       size_t block_stride, size_t row_bytes, size_t blocks, const int8_t* const* xq,
//       const float* const* xd, const int32_t* const* bias, float* const* out, size_t lane_begin,
//       size_t lane_end):
//     the group's kRows rows (rows[i], block b at rows[i] + b * block_stride) against T tokens
//     (quants, scales, bias sums per block), writing lanes [lane_begin, lane_end) to
//     out[t][0 ..); `first`: the group's first token tile, the one that streams its weights from
//     memory (and may prefetch a later group: row i + k is k * row_bytes on for k a multiple of
//     8).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/activation_rows.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kLegacyBlock = 32;
constexpr size_t kStackBiasSums = 4096;

// Where a call's rows are: plain rows (row r at base + r * row_bytes, its block b b * kBytes on)
// or the x8 block interleave of quant_dot.h (row r at base + (r / 8) * 8 * row_bytes + (r % 8) *
// kBytes, its block b b * 8 * kBytes on). Either way row r + k's bytes are k * row_bytes after row
// r's for every k that is a multiple of 8, which is all the prefetches of the walks assume.
struct LegacyRows {
  const uint8_t* base;
  size_t row_bytes;
  size_t block_bytes;
  bool interleaved;

  const uint8_t* row(size_t r) const {
    return interleaved ? base + r / 8 * 8 * row_bytes + r % 8 * block_bytes : base + r * row_bytes;
  }
  size_t block_stride() const { return interleaved ? 8 * block_bytes : block_bytes; }
};

// One tile of Groups::kRows rows (p) against tokens [t0, t0 + T); lanes [lane_begin, lane_end) go
// to y's columns from `column` on.
template <typename Fmt, typename Groups, int T>
void legacy_group_tokens(const uint8_t* const* p, const LegacyRows& w, size_t column,
                         size_t lane_begin, size_t lane_end, const ActivationRows& x,
                         const int32_t* bias_sums, size_t t0, float* y, size_t y_stride) {
  const size_t blocks = x.cols / kLegacyBlock;
  const int8_t* xq[T];
  const float* xd[T];
  const int32_t* bias[T];
  float* out[T];
  for (int i = 0; i < T; ++i) {
    const size_t t = t0 + static_cast<size_t>(i);
    xq[i] = x.qs + t * x.cols;
    xd[i] = x.d + t * blocks;
    bias[i] = Fmt::kBias != 0 ? bias_sums + t * blocks : bias_sums;  // read only with a bias
    out[i] = y + t * y_stride + column;
  }
  Groups::template run<Fmt, T>(p, t0 == 0, w.block_stride(), w.row_bytes, blocks, xq, xd, bias, out,
                               lane_begin, lane_end);
}

// Rows [row_begin, row_end) of w against every token: y[t * y_stride + (r - row_begin)]. Tiles of
// Groups::kRows rows start at row_begin (plain rows) or at its group of 8 (interleaved: the rows
// before row_begin are there and computed, not stored); past row_end a tile repeats row_end - 1
// (computed, not stored).
template <typename Fmt, typename Groups>
void legacy_dot_walk(const LegacyRows& w, size_t row_begin, size_t row_end, const ActivationRows& x,
                     float* y, size_t y_stride) {
  constexpr size_t kRows = Groups::kRows;
  const size_t blocks = x.cols / kLegacyBlock;
  const size_t n = x.n_tokens;
  if (row_begin >= row_end || n == 0) return;
  // kBias * (sum of the block's activation quants), per token and block: exact in int32
  // (|sum| <= 32 * 128). Formats without a bias (kBias 0) never read them.
  int32_t stack_sums[kStackBiasSums];
  int32_t* bias_sums =
      n * blocks <= kStackBiasSums || Fmt::kBias == 0 ? stack_sums : new int32_t[n * blocks];
  for (size_t i = 0; Fmt::kBias != 0 && i < n * blocks; ++i) {
    const int8_t* q = x.qs + i * kLegacyBlock;
    int32_t s = 0;
    for (size_t j = 0; j < kLegacyBlock; ++j) s += q[j];
    bias_sums[i] = Fmt::kBias * s;
  }
  for (size_t r = w.interleaved ? row_begin / 8 * 8 : row_begin; r < row_end; r += kRows) {
    const uint8_t* p[kRows];
    for (size_t i = 0; i < kRows; ++i) p[i] = w.row(r + i < row_end ? r + i : row_end - 1);
    const size_t first_row = r < row_begin ? row_begin : r;
    const size_t lane_begin = first_row - r;
    const size_t lane_end = row_end - r < kRows ? row_end - r : kRows;
    const size_t column = first_row - row_begin;
    // Token tiles of 8, 4, then 3 or 2, 1 (wider tiles unpack each weight block for more tokens:
    // a last three run as one tile, not as 2 + 1, with 16 sequences decoding); only the
    // first tile streams the group from memory, so only it prefetches the next group.
    size_t t = 0;
    const auto tile = [&]<int T>() {
      legacy_group_tokens<Fmt, Groups, T>(p, w, column, lane_begin, lane_end, x, bias_sums, t, y,
                                          y_stride);
      t += T;
    };
    while (t + 8 <= n) tile.template operator()<8>();
    while (t + 4 <= n) tile.template operator()<4>();
    if (n - t == 3) tile.template operator()<3>();
    while (t + 2 <= n) tile.template operator()<2>();
    while (t < n) tile.template operator()<1>();
  }
  if (bias_sums != stack_sums) delete[] bias_sums;
}

// The QuantDotFn contract (quant_dot.h) on Groups' kernels: plain rows.
template <typename Fmt, typename Groups>
void legacy_dot_rows(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride) {
  legacy_dot_walk<Fmt, Groups>({w, row_bytes, Fmt::kBytes, false}, 0, rows, x, y, y_stride);
}

// The InterleavedDotFn contract (quant_dot.h) on Groups' kernels: the x8 block interleave.
template <typename Fmt, typename Groups>
void legacy_dot_x8(const uint8_t* groups, size_t row_begin, size_t row_end, const ActivationRows& x,
                   float* y, size_t y_stride) {
  const size_t row_bytes = x.cols / kLegacyBlock * Fmt::kBytes;
  legacy_dot_walk<Fmt, Groups>({groups, row_bytes, Fmt::kBytes, true}, row_begin, row_end, x, y,
                               y_stride);
}

}  // namespace
}  // namespace tandem::kernels::detail
