// AMX-INT8 dot product of Q6_K weights (plain rows) with Q8_K activations, bit-identical to
// dot_q6_k_scalar: the prefill kernel of the `amx` matmul variant for Q6_K (what llama-quantize's
// Q4_K_M keeps in Q6_K: half of the layers' ffn_down, attn_v, the output). Built with the AVX-512
// flags plus -mavx512vnni -mamx-tile -mamx-int8 -ffp-contract=off; only the exported function has
// external linkage.
//
// Technique. Per 16 rows and super-block, the rows' 6-bit quants are unpacked to unsigned bytes
// q' = q + 32 (0..63) and transposed (16 x 16 transposes of four-element units) into the B
// tiles of the sixteen 16-element groups (quant_dot_amx_groups.h): tile row m of group g holds,
// for each row n, its elements 16g + 4m .. 16g + 4m + 3. One TDPBSUD per group gives the exact
// int32 sums of q' x activation of 16 tokens x 16 rows, scaled by the rows' int8 group scales into
// isum'. The offset comes off exactly with the activation sums: isum = isum' - 32 * sum_g scale_g
// * bsums_g (eight vpdpwssd per token on (scale_2p, scale_2p+1) pairs). Then the reference's
// sum += (dw * dx) * float(isum), lane-wise, in block order. |isum'| <= 16 * 127 * 16 * 63 * 128
// < 2^31, and 32 * |sum_g scale_g bsums_g| <= 32 * 16 * 128 * 2048 = 2^27: every integer is exact.
//
// What AMX does not cover goes to the AVX-512 VNNI kernel: calls with fewer than kAmxMinTokens
// tokens and the rows after the last whole 16.
#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/quant_dot_amx_groups.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kBlockBytes = 210;  // ql[128], qh[64], scales[16], fp16 d
constexpr size_t kGroups = 16;
constexpr size_t kGroupBytes = 16;
constexpr size_t kSumsPerBlock = 16;

// Static storage, never written at run time (amx_tiles.h).
alignas(64) constexpr std::array<TileConfig, kAmxTileTokens> kTileConfigs =
    group_tile_configs(kGroupBytes);

// One super-block of 16 rows, unpacked: the B tiles of its groups, the rows' scales per group
// (int32 lanes), their (scale_2p, scale_2p+1) int16 pairs per p, and d.
struct alignas(64) RowsBlock {
  uint8_t b[kGroups][kGroupBytes / 4][64];
  __m512i sc[kGroups];
  __m512i sc_pairs[kGroups / 2];
  __m512 dw;
};

// Row `blk`'s 256 quants + 32 (0..63), in element order, to out[0 .. 256).
void unpack_row(const uint8_t* blk, uint8_t* out) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i two = _mm256_set1_epi8(0x03);
  for (int h = 0; h < 2; ++h) {
    const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h));
    const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h + 32));
    const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h));
    const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(hb, two), 4);
    const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), two), 4);
    const __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), two), 4);
    const __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), two), 4);
    uint8_t* o = out + 128 * h;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o),
                        _mm256_or_si256(_mm256_and_si256(l0, low4), h0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 32),
                        _mm256_or_si256(_mm256_and_si256(l1, low4), h1));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64),
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), h2));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 96),
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4), h3));
  }
}

// Super-block b of rows w, w + row_bytes, ... (16 of them).
void unpack_rows_block(const uint8_t* w, size_t row_bytes, size_t b, RowsBlock& p) {
  const uint8_t* base = w + b * kBlockBytes;
  // B: 32-bit unit u = 4g + m of every row into tile row m of group g.
  rows_block_to_b_tiles(base, row_bytes, unpack_row, p.b[0][0]);
  // Scales: the 32-bit unit at byte 192 + 2p of each row's block holds (scale_2p, scale_2p+1) in
  // its low bytes; d is the high half of the unit at 206 (in bounds: the block ends at 210).
  const __m512i block_index = row_offsets(row_bytes);
#pragma GCC unroll 8
  for (size_t q = 0; q < kGroups / 2; ++q) {
    const __m512i v = _mm512_i32gather_epi32(block_index, base + 192 + 2 * q, 1);
    const __m512i s0 = _mm512_srai_epi32(_mm512_slli_epi32(v, 24), 24);
    const __m512i s1 = _mm512_srai_epi32(_mm512_slli_epi32(v, 16), 24);
    p.sc[2 * q] = s0;
    p.sc[2 * q + 1] = s1;
    p.sc_pairs[q] =
        _mm512_or_si512(_mm512_and_si512(s0, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(s1, 16));
  }
  const __m512i dv = _mm512_srli_epi32(_mm512_i32gather_epi32(block_index, base + 206, 1), 16);
  p.dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dv));
}

// One tile of n tokens (T as group_isums), tokens [tb, tb + n), of super-block b: the block's term
// added to sum[token - t0].
template <int T>
[[gnu::always_inline]] inline void tile_block(const RowsBlock& p, const int8_t* packed,
                                              const ActivationRows& x, size_t blocks, size_t b,
                                              size_t tb, size_t n, size_t t0,
                                              float (*sum)[kAmxTileRows]) {
  const size_t tokens = T != 0 ? static_cast<size_t>(T) : n;
  __m512i isum[kAmxTileTokens];
  group_isums<T, kGroupBytes, kGroups>(
      p.b, p.sc, token_tile(packed, blocks, tb / kAmxTileTokens, b), tokens, isum);
#pragma GCC unroll 16
  for (size_t t = 0; t < tokens; ++t) {
    const size_t token = tb + t;
    // sum_g scale_g * bsums_g: bsums (g = 2p, 2p + 1) are one int16 pair in memory.
    const int16_t* bs = x.bsums + (token * blocks + b) * kSumsPerBlock;
    __m512i off = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (size_t q = 0; q < kGroups / 2; ++q) {
      int32_t pair;
      std::memcpy(&pair, bs + 2 * q, 4);
      off = _mm512_dpwssd_epi32(off, p.sc_pairs[q], _mm512_set1_epi32(pair));
    }
    const __m512i exact = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(off, 5));
    const __m512 dx = _mm512_set1_ps(x.d[token * blocks + b]);
    const __m512 term = _mm512_mul_ps(_mm512_mul_ps(p.dw, dx), _mm512_cvtepi32_ps(exact));
    float* s = sum[token - t0];
    _mm512_store_ps(s, _mm512_add_ps(_mm512_load_ps(s), term));
  }
}

// Rows w .. w + 15 rows x tokens [t0, t1): sum[t - t0][lane].
void rows_chunk(const uint8_t* w, size_t row_bytes, const int8_t* packed, const ActivationRows& x,
                size_t t0, size_t t1, float (*sum)[kAmxTileRows], TileState& tiles) {
  const size_t blocks = x.cols / kAmxSuper;
  for (size_t t = t0; t < t1; ++t) _mm512_store_ps(sum[t - t0], _mm512_setzero_ps());
  // Two unpacked super-blocks: the next one is unpacked before the tiles read the current one.
  RowsBlock p[2];
  unpack_rows_block(w, row_bytes, 0, p[0]);
  for (size_t b = 0; b < blocks; ++b) {
    if (b + 1 < blocks) unpack_rows_block(w, row_bytes, b + 1, p[(b + 1) % 2]);
    const RowsBlock& cur = p[b % 2];
    for (size_t tb = t0; tb < t1; tb += kAmxTileTokens) {
      const size_t n = t1 - tb < kAmxTileTokens ? t1 - tb : kAmxTileTokens;
      tiles.use(kTileConfigs[n - 1]);
      if (n == kAmxTileTokens) {
        tile_block<kAmxTileTokens>(cur, packed, x, blocks, b, tb, n, t0, sum);
      } else {
        tile_block<0>(cur, packed, x, blocks, b, tb, n, t0, sum);
      }
    }
  }
}

}  // namespace

void dot_q6_k_amx(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                  float* y, size_t y_stride) {
  struct Kernel {
    const ActivationRows& x;
    size_t row_bytes;
    const int8_t* packed = nullptr;
    void prepare() {
      thread_local std::vector<int8_t> packed_qs;
      packed = pack_token_groups(x, kGroupBytes, packed_qs);
    }
    void chunk(const uint8_t* rows16, size_t t0, size_t t1, float (*sum)[kAmxTileRows],
               TileState& tiles) const {
      rows_chunk(rows16, row_bytes, packed, x, t0, t1, sum, tiles);
    }
  };
  Kernel kernel{x, row_bytes};
  rows_amx_call(w, row_bytes, rows, x, y, y_stride, dot_q6_k_avx512_vnni, kernel);
}

}  // namespace tandem::kernels::detail
