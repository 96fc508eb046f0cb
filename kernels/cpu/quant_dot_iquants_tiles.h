// The SIMD dot products of the grid i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S)
// with Q8_K activations, bit-identical to the scalar references (quant_dot_iquants_scalar.cpp), as
// templates an ISA file instantiates under its own -m flags after including
// quant_dot_kquants_tiles.h (its kq_madd_add, token groups, lane sums and dot_rows walk).
// The including file also defines a struct IqIsa whose kRowLanes says whether the many-token
// passes take the 16-row vpdpbusd form (quant_dot_iquants_lanes16.h, AVX-512 VNNI only).
// Everything here has internal linkage (see quant_dot_kquants_tiles.h for why); the grids are
// iq_grids.h's constant data.
//
// Technique: per 32-element sub-block one 32-byte vector v of the signed grid values (four 8-byte
// or eight 4-byte grid entries gathered by index, the sign bits expanded to +-1 bytes and applied
// with psignb), shared by every token of the tile. Per token, maddubs(|x|, sign(v, x)) forms the
// exact pair sums of v * x (|x| <= 128 as unsigned, |v| <= 62 keeps the signed operand exact, and
// a pair is at most 2 * 62 * 128 = 15872, so nothing saturates; x = -128 is exact too, unlike
// psignb applied to x), and kq_madd_add multiplies them by the int16 multipliers 2s + 1 of their
// groups into int32 lanes. IQ1 adds its deltas as maddubs(1, x) pair sums times delta * (2s + 1),
// the products taken 8 times (the reference's eighths). Per super-block the lanes are reduced
// once per (row, token) and combined lane-wise in the reference's float order,
// ((d * factor) * dx) * float(isum).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/iq_grids.h"
#include "kernels/cpu/quant_dot_x8_walk.h"

namespace tandem::kernels::detail {
namespace {

// One sub-block of weights, decoded: the signed values, the int16 multipliers 2s + 1 of each
// pair's group and (IQ1) the multipliers of its delta, delta * (2s + 1).
struct IqVectors {
  __m256i v;
  __m256i ls;
  __m256i dls;
};

// 32 sign bits (bit i: element i negative; IQ2_S, IQ3_S) as +-1 bytes.
[[gnu::always_inline]] inline __m256i iq_sign_vector(uint32_t bits) {
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                           2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i negative = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_or_si256(negative, _mm256_set1_epi8(1));
}

// Four 8-value grid entries (groups 0..3) as one vector.
template <typename T, size_t N>
[[gnu::always_inline]] inline __m256i iq_entries8(const T (&grid)[N][8], size_t i0, size_t i1,
                                                  size_t i2, size_t i3) {
  int64_t e[4];
  std::memcpy(&e[0], grid[i0], 8);
  std::memcpy(&e[1], grid[i1], 8);
  std::memcpy(&e[2], grid[i2], 8);
  std::memcpy(&e[3], grid[i3], 8);
  return _mm256_set_epi64x(e[3], e[2], e[1], e[0]);
}

// Eight 4-value grid entries as one vector.
template <size_t N>
[[gnu::always_inline]] inline __m256i iq_entries4(const uint8_t (&grid)[N][4], const size_t* i) {
  int32_t e[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) std::memcpy(&e[k], grid[i[k]], 4);
  return _mm256_setr_epi32(e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]);
}

// Four groups' 7 stored sign bits (IQ2_XXS, IQ2_XS, IQ3_XXS) as +-1 bytes: one table load each.
[[gnu::always_inline]] inline __m256i iq_sign_masks7(uint32_t s0, uint32_t s1, uint32_t s2,
                                                     uint32_t s3) {
  return _mm256_set_epi64x(static_cast<int64_t>(kIqSignMasks.v[s3 & 127]),
                           static_cast<int64_t>(kIqSignMasks.v[s2 & 127]),
                           static_cast<int64_t>(kIqSignMasks.v[s1 & 127]),
                           static_cast<int64_t>(kIqSignMasks.v[s0 & 127]));
}

// Multipliers: one for the sub-block, or one per half (groups 0-1, 2-3).
[[gnu::always_inline]] inline __m256i iq_halves(int first, int second) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(second)),
                          _mm_set1_epi16(static_cast<int16_t>(first)));
}

// Four int16 values, each in the four pair lanes of its group.
[[gnu::always_inline]] inline __m256i iq_groups(const int* m) {
  int64_t e[4];
#pragma GCC unroll 4
  for (int l = 0; l < 4; ++l) {
    e[l] = static_cast<int64_t>(static_cast<uint64_t>(static_cast<uint16_t>(m[l])) *
                                0x0001000100010001ull);
  }
  return _mm256_set_epi64x(e[3], e[2], e[1], e[0]);
}

// ---- The types: block bytes, factor, delta flag, the f16 d and the sub-block decode (layouts:
// iq_blocks.h).

struct Iq2XxsRows {
  static constexpr size_t kSpan = 32;  // elements per multiplier
  static constexpr size_t kBlockBytes = 66;
  static constexpr float kFactor = 0.125f;
  static constexpr bool kDelta = false;
  static uint16_t d_bits(const uint8_t* blk) { return load_u16(blk); }
  [[gnu::always_inline]] static IqVectors sub_block(const uint8_t* blk, size_t ib) {
    const uint8_t* q = blk + 2 + 8 * ib;
    const uint32_t aux = load_u32(q + 4);
    const __m256i g = iq_entries8(kIq2xxsGrid.v, q[0], q[1], q[2], q[3]);
    return {_mm256_sign_epi8(g, iq_sign_masks7(aux, aux >> 7, aux >> 14, aux >> 21)),
            _mm256_set1_epi16(static_cast<int16_t>(2 * (aux >> 28) + 1)), __m256i{}};
  }
};

struct Iq2XsRows {
  static constexpr size_t kSpan = 16;  // elements per multiplier
  static constexpr size_t kBlockBytes = 74;
  static constexpr float kFactor = 0.125f;
  static constexpr bool kDelta = false;
  static uint16_t d_bits(const uint8_t* blk) { return load_u16(blk); }
  [[gnu::always_inline]] static IqVectors sub_block(const uint8_t* blk, size_t ib) {
    uint16_t q[4];
    std::memcpy(q, blk + 2 + 8 * ib, 8);
    const __m256i g = iq_entries8(kIq2xsGrid.v, q[0] & 511u, q[1] & 511u, q[2] & 511u, q[3] & 511u);
    const __m256i signs = iq_sign_masks7(q[0] >> 9, q[1] >> 9, q[2] >> 9, q[3] >> 9);
    const int sc = blk[66 + ib];
    return {_mm256_sign_epi8(g, signs), iq_halves(2 * (sc & 0x0f) + 1, 2 * (sc >> 4) + 1),
            __m256i{}};
  }
};

struct Iq2SRows {
  static constexpr size_t kSpan = 16;  // elements per multiplier
  static constexpr size_t kBlockBytes = 82;
  static constexpr float kFactor = 0.125f;
  static constexpr bool kDelta = false;
  static uint16_t d_bits(const uint8_t* blk) { return load_u16(blk); }
  [[gnu::always_inline]] static IqVectors sub_block(const uint8_t* blk, size_t ib) {
    const uint8_t* qs = blk + 2 + 4 * ib;
    const unsigned qh = blk[66 + ib];
    const __m256i g = iq_entries8(kIq2sGrid.v, qs[0] | (qh & 3u) << 8, qs[1] | (qh >> 2 & 3u) << 8,
                                  qs[2] | (qh >> 4 & 3u) << 8, qs[3] | (qh >> 6 & 3u) << 8);
    const int sc = blk[74 + ib];
    return {_mm256_sign_epi8(g, iq_sign_vector(load_u32(blk + 34 + 4 * ib))),
            iq_halves(2 * (sc & 0x0f) + 1, 2 * (sc >> 4) + 1), __m256i{}};
  }
};

struct Iq3XxsRows {
  static constexpr size_t kSpan = 32;  // elements per multiplier
  static constexpr size_t kBlockBytes = 98;
  static constexpr float kFactor = 0.25f;
  static constexpr bool kDelta = false;
  static uint16_t d_bits(const uint8_t* blk) { return load_u16(blk); }
  [[gnu::always_inline]] static IqVectors sub_block(const uint8_t* blk, size_t ib) {
    const uint8_t* qs = blk + 2 + 8 * ib;
    const uint32_t aux = load_u32(blk + 66 + 4 * ib);
    const size_t index[8] = {qs[0], qs[1], qs[2], qs[3], qs[4], qs[5], qs[6], qs[7]};
    return {_mm256_sign_epi8(iq_entries4(kIq3xxsGrid.v, index),
                             iq_sign_masks7(aux, aux >> 7, aux >> 14, aux >> 21)),
            _mm256_set1_epi16(static_cast<int16_t>(2 * (aux >> 28) + 1)), __m256i{}};
  }
};

struct Iq3SRows {
  static constexpr size_t kSpan = 32;  // elements per multiplier
  static constexpr size_t kBlockBytes = 110;
  static constexpr float kFactor = 1.0f;
  static constexpr bool kDelta = false;
  static uint16_t d_bits(const uint8_t* blk) { return load_u16(blk); }
  [[gnu::always_inline]] static IqVectors sub_block(const uint8_t* blk, size_t ib) {
    const uint8_t* qs = blk + 2 + 8 * ib;
    const unsigned qh = blk[66 + ib];
    size_t index[8];
#pragma GCC unroll 8
    for (unsigned k = 0; k < 8; ++k) index[k] = qs[k] | (qh >> k & 1u) << 8;
    const int s = (blk[106 + ib / 2] >> (4 * (ib % 2))) & 0x0f;
    return {_mm256_sign_epi8(iq_entries4(kIq3sGrid.v, index),
                             iq_sign_vector(load_u32(blk + 74 + 4 * ib))),
            _mm256_set1_epi16(static_cast<int16_t>(2 * s + 1)), __m256i{}};
  }
};

struct Iq1SRows {
  static constexpr size_t kSpan = 32;  // elements per multiplier
  static constexpr size_t kBlockBytes = 50;
  static constexpr float kFactor = 0.125f;
  static constexpr bool kDelta = true;
  static uint16_t d_bits(const uint8_t* blk) { return load_u16(blk); }
  [[gnu::always_inline]] static IqVectors sub_block(const uint8_t* blk, size_t ib) {
    const uint8_t* qs = blk + 2 + 4 * ib;
    const unsigned qh = load_u16(blk + 34 + 2 * ib);
    const __m256i g = iq_entries8(kIq1sGrid.v, qs[0] | (qh & 7u) << 8, qs[1] | (qh >> 3 & 7u) << 8,
                                  qs[2] | (qh >> 6 & 7u) << 8, qs[3] | (qh >> 9 & 7u) << 8);
    const int ls = 2 * static_cast<int>((qh >> 12) & 7) + 1;
    return {g, _mm256_set1_epi16(static_cast<int16_t>(ls)),
            _mm256_set1_epi16(static_cast<int16_t>(qh & 0x8000 ? -ls : ls))};
  }
};

struct Iq1MRows {
  static constexpr size_t kSpan = 16;  // elements per multiplier
  static constexpr size_t kBlockBytes = 56;
  static constexpr float kFactor = 0.125f;
  static constexpr bool kDelta = true;
  static uint16_t d_bits(const uint8_t* blk) {
    return static_cast<uint16_t>((blk[49] >> 4) | (blk[51] & 0xf0) | (blk[53] >> 4) << 8 |
                                 (blk[55] & 0xf0) << 8);
  }
  [[gnu::always_inline]] static IqVectors sub_block(const uint8_t* blk, size_t ib) {
    const uint8_t* qs = blk + 4 * ib;
    const unsigned h0 = blk[32 + 2 * ib], h1 = blk[33 + 2 * ib];
    const __m256i g = iq_entries8(kIq1sGrid.v, qs[0] | (h0 & 7u) << 8, qs[1] | (h0 >> 4 & 7u) << 8,
                                  qs[2] | (h1 & 7u) << 8, qs[3] | (h1 >> 4 & 7u) << 8);
    const unsigned sc = load_u16(blk + 48 + 2 * (ib / 2)) >> (6 * (ib % 2));
    const int ls1 = 2 * static_cast<int>(sc & 7) + 1, ls2 = 2 * static_cast<int>(sc >> 3 & 7) + 1;
    const int dls[4] = {h0 & 8 ? -ls1 : ls1, h0 & 0x80 ? -ls1 : ls1, h1 & 8 ? -ls2 : ls2,
                        h1 & 0x80 ? -ls2 : ls2};
    return {g, iq_halves(ls1, ls2), iq_groups(dls)};
  }
};

// acc[t] += sub-block w against token t's 32 quants at xq[t] (the reference's isum part of the
// sub-block, exactly).
template <typename Rows, int T>
[[gnu::always_inline]] inline void iq_sub_block_products(const IqVectors& w,
                                                         const int8_t* const* xq, __m256i* acc) {
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[t]));
    __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(x), _mm256_sign_epi8(w.v, x));
    if constexpr (Rows::kDelta) {
      acc[t] = kq_madd_add(acc[t], _mm256_slli_epi16(p, 3), w.ls);
      p = _mm256_maddubs_epi16(_mm256_set1_epi8(1), x);
      acc[t] = kq_madd_add(acc[t], p, w.dls);
    } else {
      acc[t] = kq_madd_add(acc[t], p, w.ls);
    }
    keep_in_register(acc[t]);
  }
}

// R rows x T tokens of type Rows (the kquants tile contract: lane i = row i / T, token i % T).
template <typename Rows, int R, int T>
void iq_tile(const uint8_t* w, size_t row_bytes, size_t blocks, const TokenGroup& g,
             size_t prefetch, float* out) {
  constexpr int kLanes = R * T;
  __m128 sum = _mm_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    __m256i acc[kLanes];
#pragma GCC unroll 4
    for (int i = 0; i < kLanes; ++i) acc[i] = _mm256_setzero_si256();
    uint64_t d_bits = 0;
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w + r * row_bytes + b * Rows::kBlockBytes;
      if (prefetch != 0) prefetch_block<Rows::kBlockBytes>(blk, prefetch);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        d_bits |= static_cast<uint64_t>(Rows::d_bits(blk)) << (16 * (r * T + t));
      }
#pragma GCC unroll 8
      for (size_t ib = 0; ib < 8; ++ib) {
        const int8_t* xq[T];
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) xq[t] = g.qs[t] + b * kSuper + 32 * ib;
        iq_sub_block_products<Rows, T>(Rows::sub_block(blk, ib), xq, acc + r * T);
      }
    }
    const __m128 isum = _mm_cvtepi32_ps(sum_lanes<kLanes>(acc));
    const __m128 dw = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(d_bits)));
    // The reference's ((dw * factor) * dx) * float(isum); sum += that.
    const __m128 scaled = _mm_mul_ps(dw, _mm_set1_ps(Rows::kFactor));
    sum = _mm_add_ps(sum, _mm_mul_ps(_mm_mul_ps(scaled, tile_dx<T>(g, b)), isum));
  }
  _mm_storeu_ps(out, sum);
}

// ---- Many tokens: each weight super-block decoded once per call.
// From kIqBatchMinTokens tokens, rows go in groups of kIqBatchRows: each super-block of the group
// is decoded once into an L1-resident buffer (the signed values and multipliers of every
// sub-block) and every group of up to kIqBatchTokens tokens passes over it, so the grid gathers,
// sign expansion and scale unpacking (most of the work per 32 elements) are shared by all tokens
// instead of being redone for every 4. The running float sum of each (row, token) lives in y
// between super-blocks, in block order, so the results are the same bits as the tiles above.
constexpr size_t kIqBatchMinTokens = 5;
constexpr int kIqBatchRows = 4;
constexpr int kIqBatchTokens = 4;

template <int R>
struct IqUnpacked {
  alignas(32) int8_t v[R][kSuper];
  alignas(32) int16_t ls[R][8][16];
  alignas(32) int16_t dls[R][8][16];
  float dw[R];  // d * factor
};

template <typename Rows, int R>
void iq_unpack(const uint8_t* w, size_t row_bytes, size_t b, IqUnpacked<R>& o) {
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const uint8_t* blk = w + r * row_bytes + b * Rows::kBlockBytes;
#pragma GCC unroll 8
    for (size_t ib = 0; ib < 8; ++ib) {
      const IqVectors s = Rows::sub_block(blk, ib);
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.v[r] + 32 * ib), s.v);
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.ls[r][ib]), s.ls);
      if constexpr (Rows::kDelta) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(o.dls[r][ib]), s.dls);
      }
    }
    const float d = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(Rows::d_bits(blk))));
    o.dw[r] = d * Rows::kFactor;
  }
}

// Super-block b of the R unpacked rows (rows r0 ..) against tokens t0 .. t0 + T - 1: each
// (row, token)'s running sum in y plus the block's term (the first block starts from 0.0f, as the
// reference does).
template <typename Rows, int R, int T>
void iq_batch_tile(const IqUnpacked<R>& o, const ActivationRows& x, size_t b, size_t t0, float* y,
                   size_t y_stride, size_t r0, bool first) {
  const size_t blocks = x.cols / kSuper;
  __m256i acc[R * T];
#pragma GCC unroll 16
  for (int i = 0; i < R * T; ++i) acc[i] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    __m256i xv[T], ax[T], ones[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      xv[t] = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(x.qs + (t0 + t) * x.cols + b * kSuper + 32 * k));
      ax[t] = _mm256_abs_epi8(xv[t]);
      if constexpr (Rows::kDelta) ones[t] = _mm256_maddubs_epi16(_mm256_set1_epi8(1), xv[t]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(o.v[r] + 32 * k));
      const __m256i ls = _mm256_load_si256(reinterpret_cast<const __m256i*>(o.ls[r][k]));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i p = _mm256_maddubs_epi16(ax[t], _mm256_sign_epi8(v, xv[t]));
        if constexpr (Rows::kDelta) {
          const __m256i dls = _mm256_load_si256(reinterpret_cast<const __m256i*>(o.dls[r][k]));
          acc[r * T + t] = kq_madd_add(acc[r * T + t], _mm256_slli_epi16(p, 3), ls);
          acc[r * T + t] = kq_madd_add(acc[r * T + t], ones[t], dls);
        } else {
          acc[r * T + t] = kq_madd_add(acc[r * T + t], p, ls);
        }
        keep_in_register(acc[r * T + t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    alignas(16) float isum[4];
    _mm_store_ps(isum, _mm_cvtepi32_ps(sum_lanes<T>(acc + r * T)));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      // The reference's ((dw * factor) * dx) * float(isum); sum += that.
      const float term = (o.dw[r] * x.d[(t0 + t) * blocks + b]) * isum[t];
      float& out = y[(t0 + t) * y_stride + r0 + r];
      out = (first ? 0.0f : out) + term;
    }
  }
}

template <typename Rows, int R>
void iq_batch_rows(const uint8_t* w, size_t row_bytes, size_t r0, const ActivationRows& x, float* y,
                   size_t y_stride) {
  const size_t blocks = x.cols / kSuper;
  IqUnpacked<R> o;
  for (size_t b = 0; b < blocks; ++b) {
    iq_unpack<Rows, R>(w + r0 * row_bytes, row_bytes, b, o);
    size_t t0 = 0;
    for (; t0 + kIqBatchTokens <= x.n_tokens; t0 += kIqBatchTokens) {
      iq_batch_tile<Rows, R, kIqBatchTokens>(o, x, b, t0, y, y_stride, r0, b == 0);
    }
    for (; t0 < x.n_tokens; ++t0) iq_batch_tile<Rows, R, 1>(o, x, b, t0, y, y_stride, r0, b == 0);
  }
}

// ---- Many tokens with vpdpbusd (IqIsa::kRowLanes): rows r0 ..
// r0 + n_rows - 1 (n_rows <= 16) against every token, defined by quant_dot_iquants_lanes16.h in the
// files whose IqIsa sets kRowLanes (only referenced there).
template <typename Rows>
void iq_lanes_rows(const uint8_t* w, size_t row_bytes, size_t r0, size_t n_rows,
                   const ActivationRows& x, float* y, size_t y_stride);

// The QuantDotFn contract: the batched passes from kIqBatchMinTokens tokens, else the tiles.
template <typename Rows>
void iq_dot(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x, float* y,
            size_t y_stride);

template <typename Rows>
struct IqTiles {
  static constexpr size_t kBlockBytes = Rows::kBlockBytes;
  template <int R, int T>
  static void tile(const uint8_t* w, size_t row_bytes, size_t blocks, const TokenGroup& g,
                   size_t prefetch, float* out) {
    iq_tile<Rows, R, T>(w, row_bytes, blocks, g, prefetch, out);
  }
};

template <typename Rows>
void iq_dot(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x, float* y,
            size_t y_stride) {
  if (x.n_tokens < kIqBatchMinTokens || x.cols < kSuper) {
    dot_rows<IqTiles<Rows>>(w, row_bytes, rows, x, y, y_stride);
    return;
  }
  if constexpr (IqIsa::kRowLanes) {
    for (size_t r = 0; r < rows; r += 16) {
      iq_lanes_rows<Rows>(w, row_bytes, r, rows - r < 16 ? rows - r : 16, x, y, y_stride);
    }
    return;
  }
  size_t r = 0;
  for (; r + kIqBatchRows <= rows; r += kIqBatchRows) {
    iq_batch_rows<Rows, kIqBatchRows>(w, row_bytes, r, x, y, y_stride);
  }
  for (; r < rows; ++r) iq_batch_rows<Rows, 1>(w, row_bytes, r, x, y, y_stride);
}

}  // namespace
}  // namespace tandem::kernels::detail
