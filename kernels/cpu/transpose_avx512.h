// 16 x 16 transposes of 32-bit units in AVX-512 registers, for kernels that put one weight row in
// each 32-bit lane (the AMX B tiles, the i-quants' 16-row vpdpbusd passes). Built under at least
// -mavx512f; internal linkage (see quant_dot_kquants_tiles.h for why).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace tandem::kernels::detail {
namespace {

// r[i] = column i of the 16 x 16 matrix of 32-bit units whose rows are r[0 .. 16).
[[gnu::always_inline]] inline void transpose16x16_epi32(__m512i* r) {
  __m512i t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      t[8 * i + j] = _mm512_shuffle_i32x4(r[8 * i + j], r[8 * i + j + 4], 0x88);
      t[8 * i + j + 4] = _mm512_shuffle_i32x4(r[8 * i + j], r[8 * i + j + 4], 0xdd);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0xdd);
  }
}

// 16 rows' 256 unpacked quants each (vals[n]) with one 32-bit lane per row: 32-bit unit u
// (elements 4u .. 4u+3) of every row, row n's at byte 4n, into the 64 bytes at out + 64 u (the
// layout of vpdpbusd's rows-in-lanes sums, and of AMX B tiles: for W-element groups, tile row
// u % (W / 4) of group u / (W / 4)). Four 16 x 16 transposes of 32-bit units.
[[gnu::always_inline]] inline void rows_to_lanes16(const uint8_t (*vals)[256], uint8_t* out) {
#pragma GCC unroll 4
  for (size_t c = 0; c < 4; ++c) {
    __m512i r[16];
#pragma GCC unroll 16
    for (size_t n = 0; n < 16; ++n) r[n] = _mm512_load_si512(vals[n] + 64 * c);
    transpose16x16_epi32(r);
#pragma GCC unroll 16
    for (size_t i = 0; i < 16; ++i) _mm512_store_si512(out + 64 * (16 * c + i), r[i]);
  }
}

}  // namespace
}  // namespace tandem::kernels::detail
