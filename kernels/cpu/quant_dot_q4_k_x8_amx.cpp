// AMX-INT8 dot product of Q4_K weights in the interleaved x8 layout (quant_dot.h) with Q8_K
// activations, bit-identical to dot_q4_k_scalar: the prefill kernel of the `amx` matmul variant.
// Built with the AVX-512 flags plus -mavx512vnni -mamx-tile -mamx-int8 -ffp-contract=off; only the
// exported function has external linkage.
//
// Technique. Two consecutive x8 groups are 16 weight rows. Per super-block their quants are
// unpacked once to bytes in the AMX "B" order: for sub-block j, tile row m holds, for each of the
// 16 rows n, its elements 4m .. 4m+3 (the x8 layout already keeps those four quants of eight rows
// in one 32-byte run, so one sub-block's B tile is eight 64-byte rows, each a masked pair of such
// runs). The activation quants of 16 tokens are an "A" tile read in place (16 rows of 32 bytes,
// one activation row apart). One TDPBSUD (signed activations x unsigned quants) gives the exact
// int32 sub-block sums of 16 tokens x 16 rows; each is scaled by its row's 6-bit scale (vpmulld)
// into the super-block's isum. The min term, imin = sum_j min_j * (bsums[2j] + bsums[2j + 1]), is
// four vpmaddwd per token; then, lane-wise and in block order, the reference's
// ((dw * dx) * float(isum)) - ((dmin * dx) * float(imin)) and sum + term as separate
// instructions. Every integer is exact (|isum| < 2^25, quant_dot_q4_k_x8_tiles.h), so the result
// has the reference's bits.
//
// Tile configurations live in static storage (one per token count of a tile, 1 .. 16): GCC 12
// drops the stores to a tile configuration built on the stack just before LDTILECFG. Each call
// loads the configuration it needs and releases the tiles before it returns.
//
// What AMX does not cover goes to the AVX-512 VNNI x8 kernel: a call with fewer than
// kAmxMinTokens tokens, and the rows of the range outside whole 16-row pairs of groups.
#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/quant_dot_amx_groups.h"
#include "kernels/cpu/quant_dot_q4_k_x8_scales.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kPairRows = kAmxTileRows;  // two x8 groups
constexpr size_t kBlockBytes = 1152;        // one super-block of a group (quant_dot.h)
constexpr size_t kQuantOffset = 128;
constexpr size_t kSumsPerBlock = 16;  // Q8_K bsums per super-block
constexpr size_t kSubBlocks = 8;
constexpr size_t kSubBlockBytes = 32;

// Static storage, never written at run time (amx_tiles.h).
alignas(64) constexpr std::array<TileConfig, kAmxTileTokens> kTileConfigs =
    group_tile_configs(kSubBlockBytes);

// One super-block of a row pair, unpacked: the B tiles of its eight sub-blocks, the 16 rows'
// scales per sub-block (int32 lanes), their (min_2c, min_2c+1) int16 pairs per c, d and dmin.
struct alignas(64) PairBlock {
  uint8_t b[kSubBlocks][8][64];
  __m512i sc[kSubBlocks];
  __m512i mins[4];
  __m512 dw;
  __m512 dmin;
};

// Two 8-byte halves (group 0's rows, then group 1's) as one 16-byte value.
inline __m128i halves(const uint8_t* lo, const uint8_t* hi) {
  return _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(lo)),
                            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(hi)));
}

void unpack_pair_block(const uint8_t* blk0, const uint8_t* blk1, PairBlock& p) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) {
      const size_t off = kQuantOffset + 32 * (8 * c + m);
      const __m512i v = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk0 + off))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk1 + off)), 1);
      _mm512_store_si512(p.b[2 * c][m], _mm512_and_si512(v, low4));
      _mm512_store_si512(p.b[2 * c + 1][m], _mm512_and_si512(_mm512_srli_epi16(v, 4), low4));
    }
  }
  alignas(32) uint8_t sc[2][64];
  alignas(32) uint8_t mn[2][64];
  q4_k_x8_scale_bytes(blk0, sc[0], mn[0]);
  q4_k_x8_scale_bytes(blk1, sc[1], mn[1]);
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) p.sc[j] = _mm512_cvtepu8_epi32(halves(sc[0] + 8 * j, sc[1] + 8 * j));
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    // Row i's (min_2c, min_2c+1) bytes, rows 0-7 then 8-15, widened to int16 pairs.
    const __m128i g0 =
        _mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn[0] + 16 * c)),
                          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn[0] + 16 * c + 8)));
    const __m128i g1 =
        _mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn[1] + 16 * c)),
                          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn[1] + 16 * c + 8)));
    p.mins[c] = _mm512_cvtepu8_epi16(_mm256_set_m128i(g1, g0));
  }
  p.dw = _mm512_cvtph_ps(_mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk1)),
                                          _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk0))));
  p.dmin = _mm512_cvtph_ps(
      _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk1 + 16)),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk0 + 16))));
}

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
[[gnu::always_inline]] inline void tile_block(const PairBlock& p, const PackedTokens& x, size_t b,
                                              size_t tb, size_t n, size_t t0,
                                              float (*sum)[kPairRows]) {
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

// Rows [r0, r0 + 16) (two whole groups, the first at g0) x tokens [t0, t1): sum[t - t0][lane].
void pair_chunk(const uint8_t* g0, size_t group_bytes, const PackedTokens& x, size_t t0, size_t t1,
                float (*sum)[kPairRows], TileState& tiles) {
  const size_t blocks = x.blocks;
  for (size_t t = t0; t < t1; ++t) _mm512_store_ps(sum[t - t0], _mm512_setzero_ps());
  // Two unpacked super-blocks: the next one is unpacked before the tiles read the current one, so
  // the tile loads never wait for the vector stores that just filled their buffer.
  PairBlock p[2];
  unpack_pair_block(g0, g0 + group_bytes, p[0]);
  for (size_t b = 0; b < blocks; ++b) {
    if (b + 1 < blocks) {
      const uint8_t* next0 = g0 + (b + 1) * kBlockBytes;
      const uint8_t* next1 = next0 + group_bytes;
      if (b + 2 < blocks) {
#pragma GCC unroll 18
        for (size_t off = 0; off < kBlockBytes; off += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(next0 + kBlockBytes + off), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(next1 + kBlockBytes + off), _MM_HINT_T0);
        }
      }
      unpack_pair_block(next0, next1, p[(b + 1) % 2]);
    }
    const PairBlock& cur = p[b % 2];
    for (size_t tb = t0; tb < t1; tb += kAmxTileTokens) {
      const size_t n = t1 - tb < kAmxTileTokens ? t1 - tb : kAmxTileTokens;
      tiles.use(kTileConfigs[n - 1]);
      if (n == kAmxTileTokens) {
        tile_block<kAmxTileTokens>(cur, x, b, tb, n, t0, sum);
      } else {
        tile_block<0>(cur, x, b, tb, n, t0, sum);
      }
    }
  }
}

}  // namespace

void dot_q4_k_x8_amx(const uint8_t* groups, size_t row_begin, size_t row_end,
                     const ActivationRows& x, float* y, size_t y_stride) {
  struct Kernel {
    const ActivationRows& x;
    size_t group_bytes;
    PackedTokens packed{};
    void prepare() {
      thread_local std::vector<int8_t> packed_qs;
      thread_local std::vector<int32_t> packed_pairs;
      packed = pack_tokens(x, packed_qs, packed_pairs);
    }
    void chunk(const uint8_t* g0, size_t t0, size_t t1, float (*sum)[kPairRows],
               TileState& tiles) const {
      pair_chunk(g0, group_bytes, packed, t0, t1, sum, tiles);
    }
  };
  const size_t group_bytes = x.cols / kAmxSuper * kBlockBytes;
  Kernel kernel{x, group_bytes};
  x8_amx_call(groups, group_bytes, row_begin, row_end, x, y, y_stride, dot_q4_k_x8_avx512_vnni,
              kernel);
}

}  // namespace tandem::kernels::detail
