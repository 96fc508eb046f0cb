// AMX-INT8 dot product of Q4_K weights in the interleaved x8 layout (quant_dot.h) with Q8_K
// activations, bit-identical to dot_q4_k_scalar: the prefill kernel of the `amx` matmul variant.
// Built with the AVX-512 flags plus -mavx512vnni -mamx-tile -mamx-int8 -ffp-contract=off; only the
// exported function has external linkage.
//
// Technique. Two consecutive x8 groups are 16 weight rows. Per super-block their quants are
// unpacked once to bytes in the AMX "B" order: for sub-block j, tile row m holds, for each of the
// 16 rows n, its elements 4m .. 4m+3 (the x8 layout already keeps those four quants of eight rows
// in one 32-byte run, so one sub-block's B tile is eight 64-byte rows, each a masked pair of such
// runs), beside the rows' scales, mins, d and dmin. The tiles, the tokens' packed A tiles and the
// block arithmetic are quant_dot_q45_k_amx.h's (shared with Q5_K), the call frame and the tile
// configurations quant_dot_amx_groups.h's.
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
#include "kernels/cpu/quant_dot_q45_k_amx.h"
#include "kernels/cpu/quant_dot_q4_k_x8_scales.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kBlockBytes = 1152;  // one super-block of a group (quant_dot.h)
constexpr size_t kQuantOffset = 128;

// Two 8-byte halves (group 0's rows, then group 1's) as one 16-byte value.
inline __m128i halves(const uint8_t* lo, const uint8_t* hi) {
  return _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(lo)),
                            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(hi)));
}

void unpack_pair_block(const uint8_t* blk0, const uint8_t* blk1, Q45Block& p) {
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

// Super-block b of the pair of groups at g0 (the next group group_bytes on), prefetching the one
// after it.
struct PairUnpack {
  const uint8_t* g0;
  size_t group_bytes;
  size_t blocks;
  void operator()(size_t b, Q45Block& p) const {
    const uint8_t* blk0 = g0 + b * kBlockBytes;
    const uint8_t* blk1 = blk0 + group_bytes;
    if (b + 1 < blocks) {
#pragma GCC unroll 18
      for (size_t off = 0; off < kBlockBytes; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(blk0 + kBlockBytes + off), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(blk1 + kBlockBytes + off), _MM_HINT_T0);
      }
    }
    unpack_pair_block(blk0, blk1, p);
  }
};

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
    void chunk(const uint8_t* g0, size_t t0, size_t t1, float (*sum)[kAmxTileRows],
               TileState& tiles) const {
      q45_chunk(PairUnpack{g0, group_bytes, packed.blocks}, packed, t0, t1, sum, tiles);
    }
  };
  const size_t group_bytes = x.cols / kAmxSuper * kBlockBytes;
  Kernel kernel{x, group_bytes};
  x8_amx_call(groups, group_bytes, row_begin, row_end, x, y, y_stride, dot_q4_k_x8_avx512_vnni,
              kernel);
}

}  // namespace tandem::kernels::detail
