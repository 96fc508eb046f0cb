// AMX-INT8 dot product of Q5_K weights (plain rows) with Q8_K activations, bit-identical to
// dot_q5_k_scalar: the prefill kernel of the `amx` matmul variant for Q5_K (what unsloth's
// UD-Q4_K_XL and llama-quantize's Q5_K_M use). Built with the AVX-512 flags plus -mavx512vnni
// -mamx-tile -mamx-int8 -ffp-contract=off; only the exported function has external linkage.
//
// Technique. Per 16 rows and super-block, each row's quants (0..31: the nibble of qs plus bit j of
// qh as the fifth bit) are unpacked to bytes and transposed (16 x 16 transposes of four-element
// units) into the B tiles of the eight 32-element sub-blocks; the rows' 6-bit scales and mins,
// d and dmin go to 16-lane vectors. The tiles and the block arithmetic are Q4_K's
// (quant_dot_q45_k_amx.h).
//
// What AMX does not cover goes to the AVX-512 VNNI kernel: calls with fewer than kAmxMinTokens
// tokens and the rows after the last whole 16.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/quant_dot_amx_groups.h"
#include "kernels/cpu/quant_dot_q45_k_amx.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kBlockBytes = 176;  // fp16 d, fp16 dmin, scales[12], qh[32], qs[128]

// Row `blk`'s 256 quants (0..31), in element order, to out[0 .. 256): element 32j + l is the
// nibble (j odd: high) of qs[32 (j / 2) + l] with bit j of qh[l] above it.
void unpack_row(const uint8_t* blk, uint8_t* out) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i one = _mm256_set1_epi8(0x01);
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16));
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 48 + 32 * c));
    const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4);
    const __m256i h1 =
        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * c),
                        _mm256_or_si256(_mm256_and_si256(qs, low4), h0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * c + 32),
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qs, 4), low4), h1));
  }
}

// The 6-bit scale and min of sub-block j from a block's 12 packed bytes s (the GGUF rule).
inline int plain_scale(const uint8_t* s, int j) {
  return j < 4 ? s[j] & 63 : (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
}
inline int plain_min(const uint8_t* s, int j) {
  return j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
}

// Super-block b of the 16 rows at w (row_bytes apart).
struct RowsUnpack {
  const uint8_t* w;
  size_t row_bytes;
  void operator()(size_t b, Q45Block& p) const {
    alignas(64) uint8_t vals[kAmxTileRows][256];
    alignas(64) int32_t sc[kSubBlocks][kAmxTileRows];
    alignas(64) int32_t mins[4][kAmxTileRows];
    alignas(32) uint16_t d[kAmxTileRows];
    alignas(32) uint16_t dmin[kAmxTileRows];
    for (size_t n = 0; n < kAmxTileRows; ++n) {
      const uint8_t* blk = w + n * row_bytes + b * kBlockBytes;
      unpack_row(blk, vals[n]);
      std::memcpy(&d[n], blk, 2);
      std::memcpy(&dmin[n], blk + 2, 2);
      for (int j = 0; j < 8; ++j) sc[j][n] = plain_scale(blk + 4, j);
      for (int c = 0; c < 4; ++c) {
        mins[c][n] = plain_min(blk + 4, 2 * c) | (plain_min(blk + 4, 2 * c + 1) << 16);
      }
    }
    // B: 32-bit unit u = 8j + m of every row into tile row m of sub-block j.
    rows_to_b_tiles(vals, p.b[0][0]);
#pragma GCC unroll 8
    for (size_t j = 0; j < kSubBlocks; ++j) p.sc[j] = _mm512_load_si512(sc[j]);
#pragma GCC unroll 4
    for (size_t c = 0; c < 4; ++c) p.mins[c] = _mm512_load_si512(mins[c]);
    p.dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d)));
    p.dmin = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(dmin)));
  }
};

}  // namespace

void dot_q5_k_amx(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                  float* y, size_t y_stride) {
  struct Kernel {
    const ActivationRows& x;
    size_t row_bytes;
    PackedTokens packed{};
    void prepare() {
      thread_local std::vector<int8_t> packed_qs;
      thread_local std::vector<int32_t> packed_pairs;
      packed = pack_tokens(x, packed_qs, packed_pairs);
    }
    void chunk(const uint8_t* rows16, size_t t0, size_t t1, float (*sum)[kAmxTileRows],
               TileState& tiles) const {
      q45_chunk(RowsUnpack{rows16, row_bytes}, packed, t0, t1, sum, tiles);
    }
  };
  Kernel kernel{x, row_bytes};
  rows_amx_call(w, row_bytes, rows, x, y, y_stride, dot_q5_k_avx512_vnni, kernel);
}

}  // namespace tandem::kernels::detail
