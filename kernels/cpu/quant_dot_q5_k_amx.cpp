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

// Super-block b of the 16 rows at w (row_bytes apart).
struct RowsUnpack {
  const uint8_t* w;
  size_t row_bytes;
  void operator()(size_t b, Q45Block& p) const {
    const uint8_t* base = w + b * kBlockBytes;
    // B: 32-bit unit u = 8j + m of every row into tile row m of sub-block j.
    rows_block_to_b_tiles(base, row_bytes, unpack_row, p.b[0][0]);
    // The 16 rows' d, dmin and 12 scale bytes s[0..12) as 32-bit lanes (lane n: row n), then the
    // GGUF rule per sub-block j: j < 4: scale = s[j] & 63, min = s[j + 4] & 63; j = 4 + i:
    // scale = (s[8 + i] & 15) | (s[i] >> 6) << 4, min = (s[8 + i] >> 4) | (s[4 + i] >> 6) << 4.
    const __m512i index = row_offsets(row_bytes);
    const __m512i dd = _mm512_i32gather_epi32(index, base, 1);
    const __m512i s0 = _mm512_i32gather_epi32(index, base + 4, 1);
    const __m512i s1 = _mm512_i32gather_epi32(index, base + 8, 1);
    const __m512i s2 = _mm512_i32gather_epi32(index, base + 12, 1);
    const __m512i m63 = _mm512_set1_epi32(63);
    const __m512i m15 = _mm512_set1_epi32(15);
    const __m512i m3 = _mm512_set1_epi32(3);
    __m512i mn[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      p.sc[i] = _mm512_and_si512(_mm512_srli_epi32(s0, 8 * i), m63);
      mn[i] = _mm512_and_si512(_mm512_srli_epi32(s1, 8 * i), m63);
      p.sc[4 + i] = _mm512_or_si512(
          _mm512_and_si512(_mm512_srli_epi32(s2, 8 * i), m15),
          _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(s0, 8 * i + 6), m3), 4));
      mn[4 + i] = _mm512_or_si512(
          _mm512_and_si512(_mm512_srli_epi32(s2, 8 * i + 4), m15),
          _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(s1, 8 * i + 6), m3), 4));
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      p.mins[c] = _mm512_or_si512(mn[2 * c], _mm512_slli_epi32(mn[2 * c + 1], 16));
    }
    p.dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
    p.dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
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
