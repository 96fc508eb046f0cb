// AMX-INT8 dot product of MXFP4 weights in the interleaved x8 layout (quant_dot.h) with Q8_0
// activations, bit-identical to dot_mxfp4_scalar: the prefill kernel of the `amx` matmul variant
// for MXFP4 experts (gpt-oss). Built with the AVX-512 flags plus -mavx512vnni -mamx-tile
// -mamx-int8 -ffp-contract=off; only the exported function has external linkage.
//
// Technique. Two consecutive x8 groups are 16 weight rows. Per 32-element block, their quant runs
// (32-bit lane i of the run at 8 + 32k: row i's elements 4k .. 4k+3 in the low nibbles, 16+4k ..
// in the high ones) are looked up (vpshufb) as the signed doubled E2M1 values, -12..12, and stored
// as the block's B tile: tile row m < 4 the low nibbles of run m, row m + 4 the high ones, so row
// m holds each row's elements 4m .. 4m+3. With the 16 tokens' quants as the A tile, one TDPBSSD
// gives the exact int32 isum of 16 tokens x 16 rows; then, lane-wise and in block order, the
// reference's sum += float(isum) * (dx * de) as separate instructions (de = 2^(e - 128) exactly,
// mxfp4_values.h). |isum| <= 32 * 12 * 128: exact.
//
// What AMX does not cover goes to the AVX2 x8 kernel (the avx512 columns' MXFP4 x8 kernel): calls
// with fewer than kAmxMinTokens tokens and the rows outside whole 16-row pairs of groups.
#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/quant_dot_amx_groups.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kBlock = 32;        // elements per MXFP4 / Q8_0 block
constexpr size_t kBlockBytes = 136;  // one block of a group: 8 exponents, 8 rows x 16 bytes
constexpr size_t kScaleBytes = 8;

// Static storage, never written at run time (amx_tiles.h). One group of 32 per block.
alignas(64) constexpr std::array<TileConfig, kAmxTileTokens> kTileConfigs =
    group_tile_configs(kBlock);

// One block of a row pair, unpacked: its B tile and the 16 rows' de.
struct alignas(64) PairBlock {
  uint8_t b[8][64];
  __m512 de;
};

void unpack_pair_block(const uint8_t* blk0, const uint8_t* blk1, PairBlock& p) {
  // The doubled E2M1 values as int8, indexed by the 4-bit code, in every 128-bit lane.
  const __m512i values = _mm512_broadcast_i32x4(
      _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12));
  const __m512i low4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const size_t off = kScaleBytes + 32 * k;
    const __m512i v = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk0 + off))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk1 + off)), 1);
    _mm512_store_si512(p.b[k], _mm512_shuffle_epi8(values, _mm512_and_si512(v, low4)));
    _mm512_store_si512(
        p.b[k + 4], _mm512_shuffle_epi8(values, _mm512_and_si512(_mm512_srli_epi16(v, 4), low4)));
  }
  // de = 2^(e - 128): e >= 2 a normal float of biased exponent e - 1, e = 0, 1 the subnormals
  // 2^-128, 2^-127 (mxfp4_values.h's e8m0_half, bit for bit).
  const __m512i e = _mm512_cvtepu8_epi32(
      _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk0)),
                         _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk1))));
  const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
  const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
  const __mmask16 is_normal = _mm512_cmpge_epi32_mask(e, _mm512_set1_epi32(2));
  p.de = _mm512_castsi512_ps(_mm512_mask_blend_epi32(is_normal, subnormal, normal));
}

// One tile of n tokens, tokens [tb, tb + n), of block b: the block's term added to sum[token - t0].
void tile_block(const PairBlock& p, const int8_t* xq, const float* xd, size_t blocks, size_t b,
                size_t tb, size_t n, size_t t0, float (*sum)[kAmxTileRows]) {
  TANDEM_TILE_ZERO(0);
  TANDEM_TILE_LOAD(4, xq, kBlock);
  TANDEM_TILE_LOAD(6, p.b, 64);
  TANDEM_TILE_DPBSSD(0, 4, 6);
  alignas(64) int32_t c[kAmxTileTokens][16];
  TANDEM_TILE_STORE(0, c, 64);
  for (size_t t = 0; t < n; ++t) {
    const size_t token = tb + t;
    const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(xd[token * blocks + b]), p.de);
    const __m512 term = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[t])), scale);
    float* s = sum[token - t0];
    _mm512_store_ps(s, _mm512_add_ps(_mm512_load_ps(s), term));
  }
}

// Rows of the group pair at g0 x tokens [t0, t1): sum[t - t0][lane].
void pair_chunk(const uint8_t* g0, size_t group_bytes, const int8_t* packed,
                const ActivationRows& x, size_t t0, size_t t1, float (*sum)[kAmxTileRows],
                TileState& tiles) {
  const size_t blocks = x.cols / kBlock;
  for (size_t t = t0; t < t1; ++t) _mm512_store_ps(sum[t - t0], _mm512_setzero_ps());
  // Two unpacked blocks: the next one is unpacked before the tiles read the current one.
  PairBlock p[2];
  unpack_pair_block(g0, g0 + group_bytes, p[0]);
  for (size_t b = 0; b < blocks; ++b) {
    if (b + 1 < blocks) {
      const uint8_t* next0 = g0 + (b + 1) * kBlockBytes;
      unpack_pair_block(next0, next0 + group_bytes, p[(b + 1) % 2]);
      if (b + 8 < blocks) {
        _mm_prefetch(reinterpret_cast<const char*>(next0 + 7 * kBlockBytes), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(next0 + 7 * kBlockBytes + 64), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(next0 + 7 * kBlockBytes + group_bytes),
                     _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(next0 + 7 * kBlockBytes + group_bytes + 64),
                     _MM_HINT_T0);
      }
    }
    for (size_t tb = t0; tb < t1; tb += kAmxTileTokens) {
      const size_t n = t1 - tb < kAmxTileTokens ? t1 - tb : kAmxTileTokens;
      tiles.use(kTileConfigs[n - 1]);
      tile_block(p[b % 2], token_tile(packed, blocks, tb / kAmxTileTokens, b, kBlock), x.d, blocks,
                 b, tb, n, t0, sum);
    }
  }
}

}  // namespace

void dot_mxfp4_x8_amx(const uint8_t* groups, size_t row_begin, size_t row_end,
                      const ActivationRows& x, float* y, size_t y_stride) {
  struct Kernel {
    const ActivationRows& x;
    size_t group_bytes;
    const int8_t* packed = nullptr;
    void prepare() {
      thread_local std::vector<int8_t> packed_qs;
      packed = pack_token_groups(x, kBlock, packed_qs, kBlock);
    }
    void chunk(const uint8_t* g0, size_t t0, size_t t1, float (*sum)[kAmxTileRows],
               TileState& tiles) const {
      pair_chunk(g0, group_bytes, packed, x, t0, t1, sum, tiles);
    }
  };
  const size_t group_bytes = x.cols / kBlock * kBlockBytes;
  Kernel kernel{x, group_bytes};
  x8_amx_call(groups, group_bytes, row_begin, row_end, x, y, y_stride, dot_mxfp4_x8_avx512_vnni,
              kernel);
}

}  // namespace tandem::kernels::detail
