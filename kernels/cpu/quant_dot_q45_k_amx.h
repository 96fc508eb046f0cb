// The AMX-INT8 block arithmetic shared by the Q4_K and Q5_K tile kernels
// (quant_dot_q4_k_x8_amx.cpp on the x8 layout, quant_dot_q5_k_amx.cpp on plain rows): one
// super-block of 16 rows unpacked into eight sub-block B tiles with their scales, mins, d and
// dmin; the tokens' A tiles and min-term pairs; per tile of tokens the reference's
// isum = sum_j scale_j * (sub-block sum), imin = sum_j min_j * (bsums[2j] + bsums[2j + 1]) and
// sum += ((dw * dx) * float(isum)) - ((dmin * dx) * float(imin)), lane-wise in block order. Every
// integer is exact: |sub-block sum| <= 32 * 31 * 128, times a scale <= 63, eight of them < 2^26.
// Include after quant_dot_amx_groups.h; internal linkage.
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

// Static storage, never written at run time (amx_tiles.h).
alignas(64) constexpr std::array<TileConfig, kAmxTileTokens> kQ45TileConfigs =
    group_tile_configs(kSubBlockBytes);

// One super-block of 16 rows, unpacked: the B tiles of its eight sub-blocks, the 16 rows'
// scales per sub-block (int32 lanes), their (min_2c, min_2c+1) int16 pairs per c, d and dmin.
struct alignas(64) Q45Block {
  uint8_t b[kSubBlocks][8][64];
  __m512i sc[kSubBlocks];
  __m512i mins[4];
  __m512 dw;
  __m512 dmin;
};

// The call's activations in the forms the tiles read, made once per call: the A tiles
// (pack_token_groups) and, per token and super-block, its four (S_2c, S_2c+1) int16 pairs,
// S_j = bsums[2j] + bsums[2j + 1] (|.| <= 4096).
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
  return PackedTokens{pack_token_groups(x, kSubBlockBytes, qs), pairs.data(), x.d, blocks};
}

// One tile of n tokens (T as group_isums), tokens [tb, tb + n), of super-block b: the block's term
// added to sum[token - t0].
template <int T>
[[gnu::always_inline]] inline void tile_block(const Q45Block& p, const PackedTokens& x, size_t b,
                                              size_t tb, size_t n, size_t t0,
                                              float (*sum)[kAmxTileRows]) {
  const size_t tokens = T != 0 ? static_cast<size_t>(T) : n;
  __m512i isum[kAmxTileTokens];
  group_isums<T, kSubBlockBytes, kSubBlocks>(
      p.b, p.sc, token_tile(x.qs, x.blocks, tb / kAmxTileTokens, b), tokens, isum);
#pragma GCC unroll 16
  for (size_t t = 0; t < tokens; ++t) {
    const size_t token = tb + t;
    const int32_t* pr = x.pairs + (token * x.blocks + b) * 4;
    __m512i imin = _mm512_madd_epi16(p.mins[0], _mm512_set1_epi32(pr[0]));
    imin = _mm512_dpwssd_epi32(imin, p.mins[1], _mm512_set1_epi32(pr[1]));
    imin = _mm512_dpwssd_epi32(imin, p.mins[2], _mm512_set1_epi32(pr[2]));
    imin = _mm512_dpwssd_epi32(imin, p.mins[3], _mm512_set1_epi32(pr[3]));
    const __m512 dx = _mm512_set1_ps(x.d[token * x.blocks + b]);
    const __m512 term =
        _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(p.dw, dx), _mm512_cvtepi32_ps(isum[t])),
                      _mm512_mul_ps(_mm512_mul_ps(p.dmin, dx), _mm512_cvtepi32_ps(imin)));
    float* s = sum[token - t0];
    _mm512_store_ps(s, _mm512_add_ps(_mm512_load_ps(s), term));
  }
}

// Rows of one 16-row block x tokens [t0, t1): sum[t - t0][lane]. unpack(b, block) unpacks
// super-block b. Two unpacked super-blocks: the next one is unpacked before the tiles read the
// current one, so the tile loads never wait for the vector stores that just filled their buffer.
template <typename Unpack>
void q45_chunk(const Unpack& unpack, const PackedTokens& x, size_t t0, size_t t1,
               float (*sum)[kAmxTileRows], TileState& tiles) {
  const size_t blocks = x.blocks;
  for (size_t t = t0; t < t1; ++t) _mm512_store_ps(sum[t - t0], _mm512_setzero_ps());
  Q45Block p[2];
  unpack(0, p[0]);
  for (size_t b = 0; b < blocks; ++b) {
    if (b + 1 < blocks) unpack(b + 1, p[(b + 1) % 2]);
    const Q45Block& cur = p[b % 2];
    for (size_t tb = t0; tb < t1; tb += kAmxTileTokens) {
      const size_t n = t1 - tb < kAmxTileTokens ? t1 - tb : kAmxTileTokens;
      tiles.use(kQ45TileConfigs[n - 1]);
      if (n == kAmxTileTokens) {
        tile_block<kAmxTileTokens>(cur, x, b, tb, n, t0, sum);
      } else {
        tile_block<0>(cur, x, b, tb, n, t0, sum);
      }
    }
  }
}

}  // namespace
}  // namespace tandem::kernels::detail
