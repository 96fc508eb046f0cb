// F8_E4M3_B128 weights x BF16 activations on AVX-512 (quant_dot.h): where the CPU has AVX512-BF16
// and AVX512-VBMI, every E4M3 value is exactly a bfloat16 (3 mantissa bits in 7; exponents 2^-9 to
// 2^8 in range), so the codes become bfloat16 by table lookup and vdpbf16ps takes them with the
// activations. Per 64 codes: a qword permute, two vpermi2b lookups of the 7-bit magnitude in
// 128-byte tables (the low and the high byte of its bfloat16), the sign bit or-ed into the high
// bytes, and two byte unpacks into 64 bfloat16 in column order (the permute places each 128-bit
// lane's codes so that the in-lane unpacks come out in order). A block's 128 products go into
// one vdpbf16ps sum per (row, token), which then takes the block's scale in one FMA. From
// kConvertFromTokens tokens on, the float path's converted tiles; without AVX512-BF16 and -VBMI,
// the AVX2 kernel.
#include <immintrin.h>

#include <array>
#include <bit>
#include <cstring>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/quant_dot_bf16_walk.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kBlock = 128;
constexpr size_t kBlockBytes = 4 + kBlock;
// From this many tokens the float path's converted tiles (each code converted once per call, then
// FMAs on 64-byte-aligned floats) run as fast as vdpbf16ps with the codes converted per 8-token
// tile or faster (matmul_bench: 16 tokens about even, 128 tokens 44-48 against 43 GFLOP/s).
constexpr size_t kConvertFromTokens = 32;
constexpr size_t kPrefetchBytes = 16 * kBlockBytes;  // how far ahead in its row a tile prefetches

// Byte `high` of the bfloat16 of each positive E4M3 code 0..127 (0x7F, a NaN code the converter
// refuses, gives a NaN).
constexpr std::array<uint8_t, 128> bf16_byte_table(bool high) {
  std::array<uint8_t, 128> out{};
  for (unsigned m = 0; m < 128; ++m) {
    const uint32_t bits = std::bit_cast<uint32_t>(fp8_e4m3_to_fp32(static_cast<uint8_t>(m))) >> 16;
    out[m] = static_cast<uint8_t>(high ? bits >> 8 : bits);
  }
  return out;
}

alignas(64) constexpr std::array<uint8_t, 128> kLowBytes = bf16_byte_table(false);
alignas(64) constexpr std::array<uint8_t, 128> kHighBytes = bf16_byte_table(true);

struct Tables {
  __m512i lo0, lo1, hi0, hi1;
};

Tables load_tables() {
  return {_mm512_load_si512(kLowBytes.data()), _mm512_load_si512(kLowBytes.data() + 64),
          _mm512_load_si512(kHighBytes.data()), _mm512_load_si512(kHighBytes.data() + 64)};
}

// The 64 codes at p as 64 bfloat16 in column order: out[0] codes 0..31, out[1] codes 32..63.
[[gnu::always_inline]] inline void codes64(const uint8_t* p, const Tables& tab, __m512i out[2]) {
  // Lane k then holds codes 8k..8k+7 (low qword) and 32+8k..32+8k+7 (high qword).
  const __m512i c =
      _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 4, 1, 5, 2, 6, 3, 7), _mm512_loadu_si512(p));
  const __m512i lo = _mm512_permutex2var_epi8(tab.lo0, c, tab.lo1);  // index bit 7 (sign) unused
  const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(tab.hi0, c, tab.hi1), c,
                                               _mm512_set1_epi8(static_cast<char>(0x80)),
                                               0xF8);  // hi | (c & 0x80)
  out[0] = _mm512_unpacklo_epi8(lo, hi);
  out[1] = _mm512_unpackhi_epi8(lo, hi);
}

__m512i load32(const uint16_t* p) {
  return _mm512_loadu_si512(p);
}

__m512 dot_pair(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<const __m512bh&>(a),
                          reinterpret_cast<const __m512bh&>(b));
}

struct Avx512F8 {
  template <int R, int T>
  static void tile(const uint8_t* const* w, const uint16_t* const* x, size_t cols, float* y,
                   size_t y_stride) {
    const Tables tab = load_tables();
    __m512 acc[T][R];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
    }
    for (size_t b = 0; b < cols / kBlock; ++b) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = w[r] + b * kBlockBytes;
        // The hardware prefetchers alone leave a row's stream latency-bound; a prefetch never
        // faults, so running past the row's end is harmless.
#pragma GCC unroll 3
        for (size_t off = 0; off < kBlockBytes; off += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetchBytes + off), _MM_HINT_T0);
        }
        __m512i wv[4];
        codes64(blk + 4, tab, wv);
        codes64(blk + 68, tab, wv + 2);
        float scale;
        std::memcpy(&scale, blk, 4);
        const __m512 sc = _mm512_set1_ps(scale);
        // The activations are read where they are used (L1-resident memory operands), which
        // leaves the registers to the accumulators and the tables (a 4 x 4 tile still spilled).
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          const uint16_t* xb = x[t] + b * kBlock;
          const __m512 s0 =
              dot_pair(dot_pair(_mm512_setzero_ps(), wv[0], load32(xb)), wv[1], load32(xb + 32));
          const __m512 s1 = dot_pair(dot_pair(_mm512_setzero_ps(), wv[2], load32(xb + 64)), wv[3],
                                     load32(xb + 96));
          acc[t][r] = _mm512_fmadd_ps(_mm512_add_ps(s0, s1), sc, acc[t][r]);
        }
      }
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) y[t * y_stride + r] = _mm512_reduce_add_ps(acc[t][r]);
    }
  }
};

}  // namespace

void dot_f8_b128_avx512(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                        float* y, size_t y_stride) {
  static const bool has_bf16_vbmi = cpu_features().avx512_bf16 && cpu_features().avx512_vbmi;
  if (has_bf16_vbmi && x.n_tokens >= kConvertFromTokens) {
    dot_f8_b128_converted(matmul_kernels_avx512(), w, row_bytes, rows, x, y, y_stride);
  } else if (has_bf16_vbmi) {
    bf16_dot<Avx512F8, 1, 8>(w, row_bytes, rows, x, y, y_stride);
  } else {
    dot_f8_b128_avx2(w, row_bytes, rows, x, y, y_stride);
  }
}

}  // namespace tandem::kernels::detail
