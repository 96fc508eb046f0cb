// The grid i-quants' many-token pass on AVX-512 VNNI (quant_dot_iquants_tiles.h's iq_lanes_rows):
// 16 rows of a super-block unpacked once per call with one 32-bit lane of a 512-bit register per
// row, so that one vpdpbusd sums 4 elements of all 16 rows for one token (the activation quants
// broadcast), and each unpacked register serves every token of a tile before the next is loaded.
// Include after quant_dot_iquants_tiles.h, in a file built with the AVX-512 flags plus
// -mavx512vnni; internal linkage.
//
// Exactness, as the reference's integer: the values are biased to unsigned, u = v + 64 (in
// 2..126), and for IQ1 u = 8 * v + delta + 9 (in 0..18, delta = +-1 per group of 8 elements, so
// the deltas ride in the weights). Each span of elements sharing a multiplier (Rows::kSpan: 32, or
// 16 for IQ2_XS, IQ2_S and IQ1_M) gets its own sum, started at -bias * the span's activation sum S
// (from the Q8_K bsums) to remove the bias, then multiplied by the rows' 2s + 1 (vpmulld) into
// isum: sum(v * x) per span, and 8 * sum(v * x) + sum(delta * x) for IQ1, exactly the reference's
// group terms. Every partial sum fits int32 (|sum| < 256 * 127 * 128 before the multiplier, < 2^26
// after). The float step per (row, token) and super-block is the reference's
// sum += ((d * factor) * dx) * float(isum), the running sums kept in y between super-blocks.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/transpose_avx512.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kIqLaneRows = 16;

struct IqLanes16 {
  alignas(64) uint8_t vals[kIqLaneRows][kSuper];  // the rows' unsigned values, before the transpose
  alignas(64) uint8_t u[64][64];      // quad q (elements 4q .. 4q + 3): row i's at bytes 4i ..
  alignas(64) int32_t ls[16][16];     // span j: row i's multiplier
  alignas(64) float dw[kIqLaneRows];  // d * factor per row
};

// Super-block b of rows 0 .. n_rows - 1 (row i at w + i * row_bytes; the lanes past n_rows repeat
// row 0 and are never stored).
template <typename Rows>
void iq_unpack_lanes16(const uint8_t* w, size_t row_bytes, size_t n_rows, size_t b, IqLanes16& o) {
  for (size_t i = 0; i < kIqLaneRows; ++i) {
    const uint8_t* blk = w + (i < n_rows ? i : 0) * row_bytes + b * Rows::kBlockBytes;
#pragma GCC unroll 8
    for (size_t ib = 0; ib < 8; ++ib) {
      const IqVectors s = Rows::sub_block(blk, ib);
      __m256i u;
      if constexpr (Rows::kDelta) {
        // 8 * (v + 1) + (delta + 1): (v + 1) * 8 <= 16, so the 16-bit shift carries nothing across
        // bytes; a group's delta is the sign of its multipliers in dls (the pair lanes of its 8
        // elements).
        const __m256i negative = _mm256_cmpgt_epi16(_mm256_setzero_si256(), s.dls);
        u = _mm256_add_epi8(_mm256_slli_epi16(_mm256_add_epi8(s.v, _mm256_set1_epi8(1)), 3),
                            _mm256_andnot_si256(negative, _mm256_set1_epi8(2)));
      } else {
        u = _mm256_add_epi8(s.v, _mm256_set1_epi8(64));
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.vals[i] + 32 * ib), u);
      if constexpr (Rows::kSpan == 16) {
        o.ls[2 * ib][i] = static_cast<int16_t>(_mm256_extract_epi16(s.ls, 0));
        o.ls[2 * ib + 1][i] = static_cast<int16_t>(_mm256_extract_epi16(s.ls, 8));
      } else {
        o.ls[ib][i] = static_cast<int16_t>(_mm256_extract_epi16(s.ls, 0));
      }
    }
    const float d = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(Rows::d_bits(blk))));
    o.dw[i] = d * Rows::kFactor;
  }
  rows_to_lanes16(o.vals, &o.u[0][0]);
}

// The unpacked 16 rows (r0 .., n_rows of them real) against tokens t0 .. t0 + T - 1 of
// super-block b: y's running sums plus the block's terms, the rows of a token side by side in y.
template <typename Rows, int T>
void iq_lanes16_tile(const IqLanes16& o, const ActivationRows& x, size_t b, size_t t0, float* y,
                     size_t y_stride, size_t r0, __mmask16 rows, bool first) {
  constexpr size_t kSpans = kSuper / Rows::kSpan;
  constexpr size_t kQuads = Rows::kSpan / 4;
  constexpr size_t kSumsPerSpan = Rows::kSpan / 16;
  constexpr int kBias = Rows::kDelta ? 9 : 64;
  const size_t blocks = x.cols / kSuper;
  const int8_t* xq[T];
  const int16_t* bs[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    xq[t] = x.qs + (t0 + t) * x.cols + b * kSuper;
    bs[t] = x.bsums + ((t0 + t) * blocks + b) * 16;
  }
  __m512i isum[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
  for (size_t j = 0; j < kSpans; ++j) {
    __m512i acc[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      int bias = bs[t][kSumsPerSpan * j];
      if constexpr (kSumsPerSpan == 2) bias += bs[t][2 * j + 1];
      acc[t] = _mm512_set1_epi32(-kBias * bias);
    }
#pragma GCC unroll 8
    for (size_t q = 0; q < kQuads; ++q) {
      const size_t quad = j * kQuads + q;
      const __m512i u = _mm512_load_si512(o.u[quad]);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        int32_t x4;
        std::memcpy(&x4, xq[t] + 4 * quad, 4);
        acc[t] = _mm512_dpbusd_epi32(acc[t], u, _mm512_set1_epi32(x4));
      }
    }
    const __m512i ls = _mm512_load_si512(o.ls[j]);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(acc[t], ls));
  }
  const __m512 dw = _mm512_load_ps(o.dw);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    // The reference's ((d * factor) * dx) * float(isum); sum += that.
    const __m512 term = _mm512_mul_ps(_mm512_mul_ps(dw, _mm512_set1_ps(x.d[(t0 + t) * blocks + b])),
                                      _mm512_cvtepi32_ps(isum[t]));
    float* out = y + (t0 + t) * y_stride + r0;
    const __m512 prev = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(rows, out);
    _mm512_mask_storeu_ps(out, rows, _mm512_add_ps(prev, term));
  }
}

template <typename Rows>
void iq_lanes_rows(const uint8_t* w, size_t row_bytes, size_t r0, size_t n_rows,
                   const ActivationRows& x, float* y, size_t y_stride) {
  const size_t blocks = x.cols / kSuper;
  const __mmask16 rows = static_cast<__mmask16>((1u << n_rows) - 1);
  IqLanes16 o;
  for (size_t b = 0; b < blocks; ++b) {
    iq_unpack_lanes16<Rows>(w + r0 * row_bytes, row_bytes, n_rows, b, o);
    size_t t0 = 0;
    for (; t0 + 8 <= x.n_tokens; t0 += 8) {
      iq_lanes16_tile<Rows, 8>(o, x, b, t0, y, y_stride, r0, rows, b == 0);
    }
    for (; t0 + 4 <= x.n_tokens; t0 += 4) {
      iq_lanes16_tile<Rows, 4>(o, x, b, t0, y, y_stride, r0, rows, b == 0);
    }
    for (; t0 < x.n_tokens; ++t0) {
      iq_lanes16_tile<Rows, 1>(o, x, b, t0, y, y_stride, r0, rows, b == 0);
    }
  }
}

}  // namespace
}  // namespace tandem::kernels::detail
