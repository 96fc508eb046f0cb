// The AMX-INT8 walk shared by the tile kernels (quant_dot_{q4_k_x8,q5_k,q6_k,mxfp4_x8}_amx.cpp):
// per activation block, G groups of W activation quants (the weight type's scale groups: Q6_K
// 16 x 16, MXFP4 1 x 32), each one TDPBSUD/TDPBSSD of a 16-token A tile by a 16-row B tile (Q4_K
// and Q5_K put their scales into the weights and multiply 4 x 64: quant_dot_q45_k_amx.h). Here: the
// tile configurations, the tokens' packed A tiles, the pipelined group loop (int32 sums scaled by
// the rows' group scales), the transposes that turn unpacked rows into B tiles, and the call frames
// on the x8 layout and on plain rows. Each kernel file unpacks its own weights and does its own
// block arithmetic. Built under -mavx512f -mavx512bw -mamx-tile -mamx-int8. Everything has internal
// linkage.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/transpose_avx512.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kAmxSuper = 256;        // Q8_K super-block
constexpr size_t kAmxTileTokens = 16;    // the rows of one A tile
constexpr size_t kAmxTileRows = 16;      // weight rows of one B tile
constexpr size_t kAmxChunkTokens = 128;  // tokens whose sums one pass over 16 rows keeps
constexpr size_t kAmxMinTokens = 4;      // below this a kernel hands the call to its VNNI kernel

// Tiles: 0-3 the int32 sums of groups (tokens x 16 rows; two pairs in flight), 4-5 activation
// quants (tokens x W bytes), 6-7 weight quants (W / 4 rows of 16 x 4 bytes). One configuration
// per token count of a tile (index tokens - 1).
constexpr std::array<TileConfig, kAmxTileTokens> group_tile_configs(size_t w) {
  std::array<TileConfig, kAmxTileTokens> all{};
  for (size_t i = 0; i < kAmxTileTokens; ++i) {
    TileConfig& c = all[i];
    c.palette = 1;
    for (int t = 0; t < 8; ++t) {
      c.rows[t] = static_cast<uint8_t>(t < 6 ? i + 1 : w / 4);
      c.colsb[t] = static_cast<uint16_t>(t < 4 || t >= 6 ? 64 : w);
    }
  }
  return all;
}

// The call's activation quants as A tiles, packed once per call: for each 16-token tile and
// activation block of `block` elements (256 for Q8_K, 32 for Q8_0; kAmxTileTokens * block bytes),
// group g's 16 rows of W bytes contiguous at 16 W g. (Tiles read straight from the activation
// rows, one power-of-two row apart, would share a few L1 sets.) Returns the packed tiles, in buf.
const int8_t* pack_token_groups(const ActivationRows& x, size_t w, std::vector<int8_t>& buf,
                                size_t block = kAmxSuper) {
  const size_t blocks = x.cols / block;
  const size_t tiles = (x.n_tokens + kAmxTileTokens - 1) / kAmxTileTokens;
  const size_t tile_block = kAmxTileTokens * block;
  if (buf.size() < tiles * blocks * tile_block) buf.resize(tiles * blocks * tile_block);
  for (size_t t = 0; t < x.n_tokens; ++t) {
    for (size_t b = 0; b < blocks; ++b) {
      int8_t* tile = buf.data() + (t / kAmxTileTokens * blocks + b) * tile_block;
      const int8_t* src = x.qs + t * x.cols + b * block;
      for (size_t g = 0; g < block / w; ++g) {
        std::memcpy(tile + g * kAmxTileTokens * w + (t % kAmxTileTokens) * w, src + g * w, w);
      }
    }
  }
  return buf.data();
}

// The packed A tiles of token tile `tile`, activation block b.
inline const int8_t* token_tile(const int8_t* packed, size_t blocks, size_t tile, size_t b,
                                size_t block = kAmxSuper) {
  return packed + (tile * blocks + b) * kAmxTileTokens * block;
}

// The byte offsets of 16 rows row_bytes apart (lane n: n * row_bytes), for 32-bit gathers of one
// field of every row's block.
[[gnu::always_inline]] inline __m512i row_offsets(size_t row_bytes) {
  return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                            _mm512_set1_epi32(static_cast<int>(row_bytes)));
}

// The blocks of 16 plain rows (row n's at blk0 + n * row_bytes) as B tiles at out
// (rows_to_lanes16), each row first unpacked by unpack_row(block, 256 bytes of quants).
template <typename UnpackRow>
[[gnu::always_inline]] inline void rows_block_to_b_tiles(const uint8_t* blk0, size_t row_bytes,
                                                         UnpackRow unpack_row, uint8_t* out) {
  alignas(64) uint8_t vals[kAmxTileRows][256];
  for (size_t n = 0; n < kAmxTileRows; ++n) unpack_row(blk0 + n * row_bytes, vals[n]);
  rows_to_lanes16(vals, out);
}

// Groups 2q and 2q + 1 (A tiles at xq, B tiles b0, b1 of W / 4 rows of 64 bytes) into tiles ca, cb.
#define TANDEM_AMX_MULTIPLY_PAIR(ca, cb, xq, b0, b1, w, q)               \
  do {                                                                   \
    TANDEM_TILE_ZERO(ca);                                                \
    TANDEM_TILE_ZERO(cb);                                                \
    TANDEM_TILE_LOAD(4, (xq) + 2 * (q)*kAmxTileTokens * (w), w);         \
    TANDEM_TILE_LOAD(6, b0, 64);                                         \
    TANDEM_TILE_DPBSUD(ca, 4, 6);                                        \
    TANDEM_TILE_LOAD(5, (xq) + (2 * (q) + 1) * kAmxTileTokens * (w), w); \
    TANDEM_TILE_LOAD(7, b1, 64);                                         \
    TANDEM_TILE_DPBSUD(cb, 5, 7);                                        \
  } while (0)

// isum[t] += c[0][t] * s0 + c[1][t] * s1 (int32 lanes = rows) for the tile's tokens. T: the
// token count when known at compile time (16: registers), else 0 (n).
template <int T>
[[gnu::always_inline]] inline void drain_pair(const int32_t (*c)[kAmxTileTokens][16], __m512i s0,
                                              __m512i s1, size_t n, __m512i* isum) {
  const size_t tokens = T != 0 ? static_cast<size_t>(T) : n;
#pragma GCC unroll 16
  for (size_t t = 0; t < tokens; ++t) {
    isum[t] = _mm512_add_epi32(
        isum[t], _mm512_add_epi32(_mm512_mullo_epi32(_mm512_load_si512(c[0][t]), s0),
                                  _mm512_mullo_epi32(_mm512_load_si512(c[1][t]), s1)));
  }
}

// isum[t] = sum over the G groups of the super-block of scale_g (sc[g], int32 lane = row) times
// the exact group sum of the tile's tokens (A tiles at xq) and the 16 rows (B tiles b[g]). The
// group pairs alternate between tiles (0, 1) and (2, 3), so that the vector unit scales one
// pair's sums while the tile unit multiplies the next.
template <int T, size_t W, size_t G>
[[gnu::always_inline]] inline void group_isums(const uint8_t (*b)[W / 4][64], const __m512i* sc,
                                               const int8_t* xq, size_t n, __m512i* isum) {
  static_assert(G % 2 == 0 && G >= 4);
  constexpr size_t kPairs = G / 2;
  const size_t tokens = T != 0 ? static_cast<size_t>(T) : n;
#pragma GCC unroll 16
  for (size_t t = 0; t < tokens; ++t) isum[t] = _mm512_setzero_si512();
  alignas(64) int32_t c01[2][kAmxTileTokens][16];
  alignas(64) int32_t c23[2][kAmxTileTokens][16];
  TANDEM_AMX_MULTIPLY_PAIR(0, 1, xq, b[0], b[1], W, 0);
  TANDEM_AMX_MULTIPLY_PAIR(2, 3, xq, b[2], b[3], W, 1);
#pragma GCC unroll 8
  for (size_t q = 0; q < kPairs; ++q) {
    if (q % 2 == 0) {
      TANDEM_TILE_STORE(0, c01[0], 64);
      TANDEM_TILE_STORE(1, c01[1], 64);
      if (q + 2 < kPairs) TANDEM_AMX_MULTIPLY_PAIR(0, 1, xq, b[2 * q + 4], b[2 * q + 5], W, q + 2);
      drain_pair<T>(c01, sc[2 * q], sc[2 * q + 1], tokens, isum);
    } else {
      TANDEM_TILE_STORE(2, c23[0], 64);
      TANDEM_TILE_STORE(3, c23[1], 64);
      if (q + 2 < kPairs) TANDEM_AMX_MULTIPLY_PAIR(2, 3, xq, b[2 * q + 4], b[2 * q + 5], W, q + 2);
      drain_pair<T>(c23, sc[2 * q], sc[2 * q + 1], tokens, isum);
    }
  }
}

// The frame of an AMX kernel on an x8 interleaved layout (InterleavedDotFn, quant_dot.h): the
// 16-row pairs of whole groups inside [row_begin, row_end) go to the tiles, the rows outside them
// and calls with fewer than kAmxMinTokens tokens to `fallback` (a SIMD kernel of the same
// layout). prepare() runs once when the tiles have work; chunk(g0, t0, t1, sum, tiles) fills
// sum[t - t0][lane] for tokens [t0, t1) (at most kAmxChunkTokens) and the pair whose first group
// is at g0.
template <typename Kernel>
void x8_amx_call(const uint8_t* groups, size_t group_bytes, size_t row_begin, size_t row_end,
                 const ActivationRows& x, float* y, size_t y_stride, InterleavedDotFn fallback,
                 Kernel& kernel) {
  constexpr size_t kGroupRows = 8;
  const size_t first = (row_begin + kGroupRows - 1) / kGroupRows * kGroupRows;
  const size_t pairs = first < row_end ? (row_end - first) / kAmxTileRows : 0;
  if (x.n_tokens < kAmxMinTokens || pairs == 0) {
    fallback(groups, row_begin, row_end, x, y, y_stride);
    return;
  }
  const size_t pairs_end = first + pairs * kAmxTileRows;
  if (first > row_begin) fallback(groups, row_begin, first, x, y, y_stride);
  if (pairs_end < row_end) {
    fallback(groups, pairs_end, row_end, x, y + (pairs_end - row_begin), y_stride);
  }
  kernel.prepare();
  TileState tiles;
  alignas(64) float sum[kAmxChunkTokens][kAmxTileRows];
  for (size_t r = first; r < pairs_end; r += kAmxTileRows) {
    const uint8_t* g0 = groups + r / kGroupRows * group_bytes;
    for (size_t t0 = 0; t0 < x.n_tokens; t0 += kAmxChunkTokens) {
      const size_t t1 = x.n_tokens - t0 < kAmxChunkTokens ? x.n_tokens : t0 + kAmxChunkTokens;
      kernel.chunk(g0, t0, t1, sum, tiles);
      for (size_t t = t0; t < t1; ++t) {
        _mm512_storeu_ps(y + t * y_stride + (r - row_begin), _mm512_load_ps(sum[t - t0]));
      }
    }
  }
  _mm256_zeroupper();  // the callers may be SSE code (see attention_rows_avx2.cpp)
}

// The frame of an AMX kernel on plain rows (QuantDotFn, quant_dot.h): whole blocks of 16 rows go
// to the tiles, the rows after the last one and calls with fewer than kAmxMinTokens tokens to
// `fallback` (a SIMD kernel of the same type). prepare() runs once when the tiles have work;
// chunk(rows, t0, t1, sum, tiles) fills sum[t - t0][lane] for tokens [t0, t1) (at most
// kAmxChunkTokens) and the 16 rows starting at `rows`.
template <typename Kernel>
void rows_amx_call(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride, QuantDotFn fallback, Kernel& kernel) {
  const size_t whole = rows / kAmxTileRows * kAmxTileRows;
  if (x.n_tokens < kAmxMinTokens || whole == 0) {
    fallback(w, row_bytes, rows, x, y, y_stride);
    return;
  }
  if (whole < rows)
    fallback(w + whole * row_bytes, row_bytes, rows - whole, x, y + whole, y_stride);
  kernel.prepare();
  TileState tiles;
  alignas(64) float sum[kAmxChunkTokens][kAmxTileRows];
  for (size_t r = 0; r < whole; r += kAmxTileRows) {
    for (size_t t0 = 0; t0 < x.n_tokens; t0 += kAmxChunkTokens) {
      const size_t t1 = x.n_tokens - t0 < kAmxChunkTokens ? x.n_tokens : t0 + kAmxChunkTokens;
      kernel.chunk(w + r * row_bytes, t0, t1, sum, tiles);
      for (size_t t = t0; t < t1; ++t) {
        _mm512_storeu_ps(y + t * y_stride + r, _mm512_load_ps(sum[t - t0]));
      }
    }
  }
  _mm256_zeroupper();  // the callers may be SSE code (see attention_rows_avx2.cpp)
}

}  // namespace
}  // namespace tandem::kernels::detail
