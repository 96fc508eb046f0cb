// The AMX-INT8 block arithmetic shared by the Q4_K and Q5_K tile kernels
// (quant_dot_q4_k_x8_amx.cpp on the x8 layout, quant_dot_q5_k_amx.cpp on plain rows): one
// super-block of 16 rows unpacked into B tiles with their scales, mins, d and dmin; the tokens' A
// tiles and min-term pairs; per tile of tokens the reference's
// isum = sum_j scale_j * (sub-block sum), imin = sum_j min_j * (bsums[2j] + bsums[2j + 1]) and
// sum += ((dw * dx) * float(isum)) - ((dmin * dx) * float(imin)), lane-wise in block order.
//
// The scales go into the weights: each 6-bit scale is split as 8 hi + lo, and two B tiles hold
// q * lo and q * hi (bytes, <= 217), so one accumulating chain of four TDPBSUD per tile (64
// elements each) gives sum_j lo_j S_j and another sum_j hi_j S_j; isum is the first plus 8 times
// the second. Scaling per sub-block in int32 lanes (a vpmulld per token, row block and sub-block)
// was most of the kernel's time before. Every integer is exact: |sub-block sum| <= 32 * 31 * 128,
// times a scale <= 63, eight of them < 2^26. Include after quant_dot_amx_groups.h; internal
// linkage.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/quant_dot_amx_groups.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kSumsPerBlock = 16;  // Q8_K bsums per super-block
constexpr size_t kSubBlocks = 8;
constexpr size_t kSubBlockBytes = 32;
constexpr size_t kChunkBytes = 64;  // two sub-blocks: the K of one TDPBSUD
constexpr size_t kChunks = kAmxSuper / kChunkBytes;
constexpr int kScaleSplit = 3;  // scale = (hi << kScaleSplit) + lo, hi and lo <= 7

// Static storage, never written at run time (amx_tiles.h). Tiles 0-3: two (lo, hi) sum pairs in
// flight; 4-5: 16 tokens x 64 activation bytes; 6-7: the lo and hi weight tiles of 16 rows of 64.
// A last tile of fewer tokens still multiplies 16 rows of A (the packed buffer holds whole tiles)
// and drains only its own: one configuration, so no reload clears the tiles in flight.
alignas(64) constexpr TileConfig kQ45TileConfig =
    group_tile_configs(kChunkBytes)[kAmxTileTokens - 1];

// One super-block of 16 rows, unpacked. The unpacker fills b with the quants (0..31) in B-tile
// order (sub-block j's tile row m: elements 4m .. 4m+3 of the 16 rows, row n's at byte 4n) and
// sc with the scales (int32 lane = row); scale_quants then splits each scale and leaves b = q *
// lo, bh = q * hi (both <= 31 * 7, bytes). Sub-blocks 2c and 2c + 1 are contiguous, so b[2c] is
// the 16-row B tile of 64-element chunk c. Beside them the rows' (min_2c, min_2c+1) int16 pairs
// per c, d and dmin.
struct alignas(64) Q45Block {
  uint8_t b[kSubBlocks][8][64];
  uint8_t bh[kSubBlocks][8][64];
  __m512i sc[kSubBlocks];
  __m512i mins[4];
  __m512 dw;
  __m512 dmin;
};

// b, bh = q * (scale & 7), q * (scale >> 3) per sub-block: with no weight over 31 neither product
// passes 217, so one 16-bit multiply by the row's factor (both halves of a row's 32-bit unit)
// makes both bytes' products without a carry between them. sum_j scale_j * S_j is then
// sum_j lo_j * S_j + 8 * sum_j hi_j * S_j: exact, as the reference's integer.
[[gnu::always_inline]] inline void scale_quants(Q45Block& p) {
  const __m512i low = _mm512_set1_epi32((1 << kScaleSplit) - 1);
  const __m512i both = _mm512_set1_epi32(0x00010001);
#pragma GCC unroll 8
  for (size_t j = 0; j < kSubBlocks; ++j) {
    const __m512i lo = _mm512_mullo_epi32(_mm512_and_si512(p.sc[j], low), both);
    const __m512i hi = _mm512_mullo_epi32(_mm512_srli_epi32(p.sc[j], kScaleSplit), both);
#pragma GCC unroll 8
    for (size_t m = 0; m < 8; ++m) {
      const __m512i q = _mm512_load_si512(p.b[j][m]);
      _mm512_store_si512(p.b[j][m], _mm512_mullo_epi16(q, lo));
      _mm512_store_si512(p.bh[j][m], _mm512_mullo_epi16(q, hi));
    }
  }
}

// The call's activations in the forms the tiles read, made once per call: the A tiles
// (pack_token_groups, 64-element chunks) and, per token and super-block, its four
// (S_2c, S_2c+1) int16 pairs, S_j = bsums[2j] + bsums[2j + 1] (|.| <= 4096).
struct PackedTokens {
  const int8_t* qs;
  const int32_t* pairs;
  const float* d;
  size_t blocks;
};

PackedTokens pack_tokens(const ActivationRows& x, std::vector<int8_t>& qs,
                         std::vector<int32_t>& pairs) {
  const size_t blocks = x.cols / kAmxSuper;
  if (pairs.size() < x.n_tokens * blocks * 4) pairs.resize(x.n_tokens * blocks * 4);
  for (size_t t = 0; t < x.n_tokens; ++t) {
    for (size_t b = 0; b < blocks; ++b) {
      const int16_t* bs = x.bsums + (t * blocks + b) * kSumsPerBlock;
      for (size_t c = 0; c < 4; ++c) {
        const auto s0 = static_cast<uint16_t>(bs[4 * c] + bs[4 * c + 1]);
        const auto s1 = static_cast<uint16_t>(bs[4 * c + 2] + bs[4 * c + 3]);
        pairs[(t * blocks + b) * 4 + c] = static_cast<int32_t>(s0 | (uint32_t{s1} << 16));
      }
    }
  }
  return PackedTokens{pack_token_groups(x, kChunkBytes, qs), pairs.data(), x.d, blocks};
}

// Sums of one token tile of one super-block into tiles (ca, cb): ca = sum over the chunks of A x
// (q * lo), cb of A x (q * hi).
#define TANDEM_Q45_MULTIPLY(ca, cb, xq, p)                   \
  do {                                                       \
    TANDEM_TILE_ZERO(ca);                                    \
    TANDEM_TILE_ZERO(cb);                                    \
    TANDEM_TILE_LOAD(4, (xq), 64);                           \
    TANDEM_TILE_LOAD(6, (p).b[0], 64);                       \
    TANDEM_TILE_DPBSUD(ca, 4, 6);                            \
    TANDEM_TILE_LOAD(7, (p).bh[0], 64);                      \
    TANDEM_TILE_DPBSUD(cb, 4, 7);                            \
    TANDEM_TILE_LOAD(5, (xq) + kAmxTileTokens * 64, 64);     \
    TANDEM_TILE_LOAD(6, (p).b[2], 64);                       \
    TANDEM_TILE_DPBSUD(ca, 5, 6);                            \
    TANDEM_TILE_LOAD(7, (p).bh[2], 64);                      \
    TANDEM_TILE_DPBSUD(cb, 5, 7);                            \
    TANDEM_TILE_LOAD(4, (xq) + 2 * kAmxTileTokens * 64, 64); \
    TANDEM_TILE_LOAD(6, (p).b[4], 64);                       \
    TANDEM_TILE_DPBSUD(ca, 4, 6);                            \
    TANDEM_TILE_LOAD(7, (p).bh[4], 64);                      \
    TANDEM_TILE_DPBSUD(cb, 4, 7);                            \
    TANDEM_TILE_LOAD(5, (xq) + 3 * kAmxTileTokens * 64, 64); \
    TANDEM_TILE_LOAD(6, (p).b[6], 64);                       \
    TANDEM_TILE_DPBSUD(ca, 5, 6);                            \
    TANDEM_TILE_LOAD(7, (p).bh[6], 64);                      \
    TANDEM_TILE_DPBSUD(cb, 5, 7);                            \
  } while (0)
static_assert(kChunks == 4, "TANDEM_Q45_MULTIPLY runs four chunks");

// One token tile of one super-block whose (lo, hi) sums are in c: tokens [tb, tb + n) (T as
// group_isums), isum = lo + 8 hi, and the block's term added to sum[token - t0] (stored when
// `first`: the row's first super-block).
template <int T>
[[gnu::always_inline]] inline void drain_block(const int32_t (*c)[kAmxTileTokens][16],
                                               const Q45Block& p, const PackedTokens& x, size_t b,
                                               size_t tb, size_t n, size_t t0, bool first,
                                               float (*sum)[kAmxTileRows]) {
  const size_t tokens = T != 0 ? static_cast<size_t>(T) : n;
#pragma GCC unroll 16
  for (size_t t = 0; t < tokens; ++t) {
    const size_t token = tb + t;
    const __m512i isum = _mm512_add_epi32(
        _mm512_load_si512(c[0][t]), _mm512_slli_epi32(_mm512_load_si512(c[1][t]), kScaleSplit));
    const int32_t* pr = x.pairs + (token * x.blocks + b) * 4;
    __m512i imin = _mm512_madd_epi16(p.mins[0], _mm512_set1_epi32(pr[0]));
    imin = _mm512_dpwssd_epi32(imin, p.mins[1], _mm512_set1_epi32(pr[1]));
    imin = _mm512_dpwssd_epi32(imin, p.mins[2], _mm512_set1_epi32(pr[2]));
    imin = _mm512_dpwssd_epi32(imin, p.mins[3], _mm512_set1_epi32(pr[3]));
    const __m512 dx = _mm512_set1_ps(x.d[token * x.blocks + b]);
    const __m512 term =
        _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(p.dw, dx), _mm512_cvtepi32_ps(isum)),
                      _mm512_mul_ps(_mm512_mul_ps(p.dmin, dx), _mm512_cvtepi32_ps(imin)));
    float* s = sum[token - t0];
    _mm512_store_ps(s, first ? term : _mm512_add_ps(_mm512_load_ps(s), term));
  }
}

// One (super-block, token tile) whose sums are in flight in tile pair `set`.
struct Q45Item {
  size_t b, tb, n;
  int set;
};

// Stores the sums of `item` (its tiles' work has been issued) and adds its terms.
[[gnu::always_inline]] inline void finish_item(const Q45Item& item, const Q45Block& p,
                                               const PackedTokens& x, size_t t0,
                                               float (*sum)[kAmxTileRows]) {
  alignas(64) int32_t c[2][kAmxTileTokens][16];
  if (item.set == 0) {
    TANDEM_TILE_STORE(0, c[0], 64);
    TANDEM_TILE_STORE(1, c[1], 64);
  } else {
    TANDEM_TILE_STORE(2, c[0], 64);
    TANDEM_TILE_STORE(3, c[1], 64);
  }
  if (item.n == kAmxTileTokens) {
    drain_block<kAmxTileTokens>(c, p, x, item.b, item.tb, item.n, t0, item.b == 0, sum);
  } else {
    drain_block<0>(c, p, x, item.b, item.tb, item.n, t0, item.b == 0, sum);
  }
}

// Rows of one 16-row block x tokens [t0, t1): sum[t - t0][lane]. unpack(b, block) unpacks
// super-block b. The tile unit works on one (super-block, token tile) while the vector unit adds
// the previous one's terms (tile pairs 0-1 and 2-3 alternate), and super-block b + 1 is unpacked
// into the second buffer while the tiles read block b (so tile loads never wait for the vector
// stores that just filled their buffer).
template <typename Unpack>
void q45_chunk(const Unpack& unpack, const PackedTokens& x, size_t t0, size_t t1,
               float (*sum)[kAmxTileRows], TileState& tiles) {
  const size_t blocks = x.blocks;
  Q45Block p[2];
  unpack(0, p[0]);
  scale_quants(p[0]);
  tiles.use(kQ45TileConfig);
  Q45Item prev{};
  bool pending = false;
  int set = 0;
  for (size_t b = 0; b < blocks; ++b) {
    const Q45Block& cur = p[b % 2];
    for (size_t tb = t0; tb < t1; tb += kAmxTileTokens) {
      const size_t n = t1 - tb < kAmxTileTokens ? t1 - tb : kAmxTileTokens;
      const int8_t* xq = token_tile(x.qs, blocks, tb / kAmxTileTokens, b);
      if (set == 0) {
        TANDEM_Q45_MULTIPLY(0, 1, xq, cur);
      } else {
        TANDEM_Q45_MULTIPLY(2, 3, xq, cur);
      }
      if (pending) finish_item(prev, p[prev.b % 2], x, t0, sum);
      if (tb == t0 && b + 1 < blocks) {  // block b - 1's items are all finished
        unpack(b + 1, p[(b + 1) % 2]);
        scale_quants(p[(b + 1) % 2]);
      }
      prev = Q45Item{b, tb, n, set};
      pending = true;
      set ^= 1;
    }
  }
  if (pending) finish_item(prev, p[prev.b % 2], x, t0, sum);
}

#undef TANDEM_Q45_MULTIPLY

}  // namespace
}  // namespace tandem::kernels::detail
