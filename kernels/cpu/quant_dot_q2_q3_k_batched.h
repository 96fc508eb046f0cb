// The batched (several tokens) SIMD dot products of Q2_K and Q3_K weights with Q8_K activations,
// bit-identical to the scalar references in quant_dot_kquants_scalar.cpp, built on the tiles of
// quant_dot_q2_q3_k_tiles.h (which it includes). An ISA file includes quant_dot_kquants_tiles.h,
// defines in tandem::kernels::detail's anonymous namespace a struct Q23BatchIsa, then includes
// this header:
//   kPremultiplied: whether the unpacked weights carry their group scale (VNNI) or not (AVX2);
//   kRows: the weight rows of a tile (each tile is kRows rows x at most 4 tokens);
//   kMinTokens: the fewest tokens (at least kMinPassTokens) that take these tiles, not the
//     plain-row ones;
//   kMinPassTokens: 3 or 4: tokens pass over the unpacked rows in groups of 4, and with 3 a last
//     group of 3 tokens gets its own narrower pass; a smaller last group runs on the plain-row
//     tiles;
//   step(acc, u, x, s): acc plus the exact int32 products of the 32 unpacked weight bytes u
//     (unsigned) with the 32 activation quants x, times s (the int16 group scale pair, used only
//     without kPremultiplied).
// Everything here has internal linkage (see quant_dot_kquants_tiles.h for why).
//
// Technique: the plain-row tiles (quant_dot_q2_q3_k_tiles.h) unpack each weight block for every
// group of at most 4 tokens. Here kRows rows x kQ23BlockChunk super-blocks are unpacked once into
// an L1-resident buffer (quants in element order, plus scales, mins and fp16 d / dmin as floats),
// and then every group of (at most) 4 tokens passes over it: per 32 elements of a group of T
// tokens, kRows weight loads and T activation loads feed kRows * T steps. With 3 tokens (a decode
// step's experts often see that few) the plain-row tiles (1 row x 3 tokens) spend most of their
// time on each super-block's unpacking, reduction and float combine for 3 (row, token) lanes;
// here the unpacking is shared by the 3 tokens and the combine runs 8 lanes wide. The running float
// sums of a (row, token) carry over from one chunk of super-blocks to the next through y, whose
// float values are stored exactly.
//
// Unpacked forms (u = the bytes a step multiplies with the signed activation quants):
//  - premultiplied: Q2_K u = scale * q in 0..45; Q3_K u = (scale - 32) * q + 127 in 3..255
//    (q = the signed quant in -4..3). One vpdpbusd per 32 elements: u8 x s8 products summed by
//    fours in int32, no saturation. Q3_K's isum is then sum(u * xq) - 127 * sum(bsums), exactly
//    the reference's sum of q * xq * (scale - 32), since the bsums are the sums of the quants;
//    the -127 * bsums term starts each accumulator.
//  - scaled (AVX2): u = the unsigned quant of quant_dot_q2_q3_k_tiles.h (Q2_K q, Q3_K q + 4) and
//    the int16 group scales beside it; maddubs + madd as in that header, with Q3_K's
//    -4 * sum_g (scale_g - 32) * bsums_g correction.
// Q2_K's imin is the madd of the bsums with the 16 mins. The integer parts of each (row, token)
// are reduced to one int32 per super-block, then combined with the float operations of the
// reference, one (row, token) per lane, in block order.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot_q2_q3_k_tiles.h"

namespace tandem::kernels::detail {
namespace {

constexpr int kQ23BatchTokens = 4;    // the most tokens of a tile
constexpr size_t kQ23BlockChunk = 8;  // super-blocks unpacked at once

// kRows (at most 8) rows of one super-block, unpacked.
template <int R>
struct Q23Unpacked {
  alignas(32) uint8_t u[R][kSuper];
  alignas(32) int16_t sc[R][8][16];  // scaled form: the scale pair of each 32 elements
  alignas(32) int16_t corr[R][16];   // Q2_K: the mins; Q3_K, scaled form: 4 * (scale - 32)
  alignas(32) float dw[8];           // per row
  alignas(32) float dmin[8];         // per row (Q2_K)
};

// The lanes of a tile of R rows x T tokens: lane j of its float vector v is (row, token) =
// (i / T, i % T), i = 8v + j; lanes past R * T repeat the last (their results are dropped).
// lane_index returns those rows (kRow) or tokens as a permutevar8x32 control.
template <int R, int T, bool kRow>
[[gnu::always_inline]] inline __m256i lane_index(int v) {
  alignas(32) int32_t idx[8];
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const int i = 8 * v + j < R * T ? 8 * v + j : R * T - 1;
    idx[j] = kRow ? i / T : i % T;
  }
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(idx));
}

// Elements 32k..32k + 31, k = 4H + S, of the super-block into o's row r.
template <bool kQ3, int H, int S, int R>
[[gnu::always_inline]] inline void q23_unpack_step(__m256i qs, __m256i hmask, __m256i scales,
                                                   Q23Unpacked<R>& o, int r) {
  constexpr int k = 4 * H + S;
  const __m256i q = q23_k_quants<kQ3, H, S>(qs, hmask);
  const __m256i s = group_pair_scales<S>(scales);
  __m256i u = q;
  if constexpr (Q23BatchIsa::kPremultiplied) {
    // Per 128-bit half, the byte table scale * (j - 4) + 127 (Q3_K) or scale * j (Q2_K) for
    // j = 0..7, indexed by q (Q3_K's q + 4 = j).
    const __m256i j =
        kQ3 ? _mm256_setr_epi16(-4, -3, -2, -1, 0, 1, 2, 3, -4, -3, -2, -1, 0, 1, 2, 3)
            : _mm256_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i t16 =
        _mm256_add_epi16(_mm256_mullo_epi16(s, j), _mm256_set1_epi16(kQ3 ? 127 : 0));
    u = _mm256_shuffle_epi8(_mm256_packus_epi16(t16, t16), q);
  } else {
    _mm256_store_si256(reinterpret_cast<__m256i*>(o.sc[r][k]), s);
  }
  _mm256_store_si256(reinterpret_cast<__m256i*>(o.u[r] + 32 * k), u);
}

template <bool kQ3, int H, int R>
[[gnu::always_inline]] inline void q23_unpack_half(const uint8_t* qs, __m256i hmask, __m256i scales,
                                                   Q23Unpacked<R>& o, int r) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * H));
  q23_unpack_step<kQ3, H, 0>(v, hmask, scales, o, r);
  q23_unpack_step<kQ3, H, 1>(v, hmask, scales, o, r);
  q23_unpack_step<kQ3, H, 2>(v, hmask, scales, o, r);
  q23_unpack_step<kQ3, H, 3>(v, hmask, scales, o, r);
}

// The super-block at blk into row r of o.
template <bool kQ3, int R>
void q23_unpack(const uint8_t* blk, Q23Unpacked<R>& o, int r) {
  __m256i sc16, mins16 = _mm256_setzero_si256(), hmask = _mm256_setzero_si256();
  float dw, dmin = 0.0f;
  if constexpr (kQ3) {
    sc16 = q3_k_scales(blk + 96);
    hmask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk));
    dw = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(load_u16(blk + 108))));
  } else {
    q2_k_scales_mins(blk, sc16, mins16);
    const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(load_u32(blk + 80))));
    dw = _mm_cvtss_f32(f);
    dmin = _mm_cvtss_f32(_mm_movehdup_ps(f));
  }
  const uint8_t* qs = blk + (kQ3 ? 32 : 16);
  q23_unpack_half<kQ3, 0>(qs, hmask, _mm256_permute4x64_epi64(sc16, 0x44), o, r);
  q23_unpack_half<kQ3, 1>(qs, hmask, _mm256_permute4x64_epi64(sc16, 0xee), o, r);
  if constexpr (!kQ3) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(o.corr[r]), mins16);
  } else if constexpr (!Q23BatchIsa::kPremultiplied) {
    // 4 * (scale - 32) fits int16 (|.| <= 128); its madd with the bsums stays far inside int32.
    _mm256_store_si256(reinterpret_cast<__m256i*>(o.corr[r]), _mm256_slli_epi16(sc16, 2));
  }
  o.dw[r] = dw;
  o.dmin[r] = dmin;
}

// Lane i = the exact int32 sum of the 8 lanes of v[i], i < 8 (integer adds wrap, so each lane is
// exact whenever its true sum fits in int32).
[[gnu::always_inline]] inline __m256i sum_lanes8(const __m256i* v) {
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  // Each half of a (b) holds v[0..3] (v[4..7])'s sums over that half's 4 elements.
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                          _mm256_permute2x128_si256(a, b, 0x31));
}

// One super-block (unpacked in o) against T tokens (quants xq[t], bsums bs[t], scales dx: lane
// t = token t's): sum[i / 8] lane i % 8 += the reference's term of lane i (lane_index).
template <bool kQ3, int R, int T>
[[gnu::always_inline]] inline void q23_batch_block(const Q23Unpacked<R>& o, const int8_t* const* xq,
                                                   const int16_t* const* bs, __m256 dx,
                                                   __m256* sum) {
  constexpr int kVecs = (R * T + 7) / 8;
  constexpr int kLanes = 8 * kVecs;  // the padding lanes' sums stay 0
  __m256i bsv[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) bsv[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bs[t]));
  __m256i acc[kLanes];
#pragma GCC unroll 8
  for (int i = R * T; i < kLanes; ++i) acc[i] = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const __m256i init = kQ3 && Q23BatchIsa::kPremultiplied
                             ? _mm256_madd_epi16(bsv[t], _mm256_set1_epi16(-127))
                             : _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r * T + t] = init;
  }
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    __m256i x[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      x[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[t] + 32 * k));
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256i u = _mm256_load_si256(reinterpret_cast<const __m256i*>(o.u[r] + 32 * k));
      const __m256i s = Q23BatchIsa::kPremultiplied
                            ? _mm256_setzero_si256()
                            : _mm256_load_si256(reinterpret_cast<const __m256i*>(o.sc[r][k]));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        acc[r * T + t] = Q23BatchIsa::step(acc[r * T + t], u, x[t], s);
        keep_in_register(acc[r * T + t]);
      }
    }
  }
  if constexpr (kQ3 && !Q23BatchIsa::kPremultiplied) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256i c = _mm256_load_si256(reinterpret_cast<const __m256i*>(o.corr[r]));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        acc[r * T + t] = _mm256_sub_epi32(acc[r * T + t], _mm256_madd_epi16(bsv[t], c));
      }
    }
  }
  [[maybe_unused]] __m256i min_parts[kLanes];  // Q2_K only
  if constexpr (!kQ3) {
#pragma GCC unroll 8
    for (int i = R * T; i < kLanes; ++i) min_parts[i] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256i m = _mm256_load_si256(reinterpret_cast<const __m256i*>(o.corr[r]));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) min_parts[r * T + t] = _mm256_madd_epi16(bsv[t], m);
    }
  }
  const __m256 dw_rows = _mm256_load_ps(o.dw);
  [[maybe_unused]] const __m256 dmin_rows = _mm256_load_ps(o.dmin);
#pragma GCC unroll 2
  for (int v = 0; v < kVecs; ++v) {
    const __m256 isum = _mm256_cvtepi32_ps(sum_lanes8(acc + 8 * v));
    const __m256 dw = _mm256_permutevar8x32_ps(dw_rows, lane_index<R, T, true>(v));
    const __m256 dx_v = _mm256_permutevar8x32_ps(dx, lane_index<R, T, false>(v));
    if constexpr (kQ3) {
      // The reference's (dw * dx) * float(isum); sum += that.
      sum[v] = _mm256_add_ps(sum[v], _mm256_mul_ps(_mm256_mul_ps(dw, dx_v), isum));
    } else {
      // The reference's ((dw * dx) * float(isum)) - ((dmin * dx) * float(imin)); sum += that.
      const __m256 imin = _mm256_cvtepi32_ps(sum_lanes8(min_parts + 8 * v));
      const __m256 dmin = _mm256_permutevar8x32_ps(dmin_rows, lane_index<R, T, true>(v));
      const __m256 term = _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(dw, dx_v), isum),
                                        _mm256_mul_ps(_mm256_mul_ps(dmin, dx_v), imin));
      sum[v] = _mm256_add_ps(sum[v], term);
    }
  }
}

// Tokens t0..t0 + T - 1 over the nb super-blocks from b0 unpacked in buf (rows r0..r0 + R - 1):
// their running sums in y (0 before the first chunk of super-blocks) += the chunk's terms.
template <bool kQ3, int R, int T>
void q23_batch_pass(const Q23Unpacked<R>* buf, size_t nb, size_t b0, size_t r0,
                    const ActivationRows& x, size_t t0, float* y, size_t y_stride) {
  constexpr int kVecs = (R * T + 7) / 8;
  const size_t blocks = x.cols / kSuper;
  const int8_t* xq[T];
  const int16_t* bs[T];
  const float* xd[kQ23BatchTokens];
  float* out[T];
#pragma GCC unroll 4
  for (int t = 0; t < kQ23BatchTokens; ++t) {
    const size_t tt = t0 + (t < T ? t : T - 1);
    xd[t] = x.d + tt * blocks + b0;
    if (t >= T) continue;
    xq[t] = x.qs + tt * x.cols + b0 * kSuper;
    bs[t] = x.bsums + (tt * blocks + b0) * kSumsPerBlock;
    out[t] = y + tt * y_stride + r0;
  }
  alignas(32) float lanes[8 * kVecs];
  __m256 sum[kVecs];
  if (b0 == 0) {
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v) sum[v] = _mm256_setzero_ps();
  } else {
    for (int i = 0; i < R * T; ++i) lanes[i] = out[i % T][i / T];
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v) sum[v] = _mm256_load_ps(lanes + 8 * v);
  }
  for (size_t b = 0; b < nb; ++b) {
    const __m128 d4 = _mm_setr_ps(xd[0][b], xd[1][b], xd[2][b], xd[3][b]);
    const int8_t* xqb[T];
    const int16_t* bsb[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      xqb[t] = xq[t] + b * kSuper;
      bsb[t] = bs[t] + b * kSumsPerBlock;
    }
    q23_batch_block<kQ3, R, T>(buf[b], xqb, bsb, _mm256_set_m128(d4, d4), sum);
  }
#pragma GCC unroll 2
  for (int v = 0; v < kVecs; ++v) _mm256_store_ps(lanes + 8 * v, sum[v]);
  for (int i = 0; i < R * T; ++i) out[i % T][i / T] = lanes[i];
}

// The QuantDotFn contract for Q2_K (kQ3 false) or Q3_K: with Q23BatchIsa::kMinTokens or more,
// whole tiles of kRows rows run here, passing the tokens in groups of 4 (and, with kMinPassTokens
// 3, a last group of 3); the rest (the last rows % kRows rows, the tokens of a smaller last group)
// runs on the plain-row tiles, as all of it does with fewer tokens.
template <bool kQ3>
void dot_q23_k(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x, float* y,
               size_t y_stride) {
  using Tiles = Q23KTiles<kQ3>;
  constexpr int R = Q23BatchIsa::kRows;
  constexpr size_t T = kQ23BatchTokens;
  static_assert(Q23BatchIsa::kMinPassTokens == 3 || Q23BatchIsa::kMinPassTokens == T);
  const size_t blocks = x.cols / kSuper;
  const size_t tail = x.n_tokens % T;
  const size_t passed_tokens =
      x.n_tokens / T * T + (tail >= Q23BatchIsa::kMinPassTokens ? tail : 0);
  const size_t full_rows = rows / R * R;
  if (x.n_tokens < Q23BatchIsa::kMinTokens || passed_tokens == 0 || full_rows == 0 || blocks == 0) {
    dot_rows<Tiles>(w, row_bytes, rows, x, y, y_stride);
    return;
  }
  // The weights are prefetched as the plain-row tiles do (quant_dot_kquants_tiles.h's dot_tiles):
  // a whole number of R-row tiles, about kPrefetchBytes, ahead of the unpacking. In decode, where
  // each expert sees a few tokens and its weights stream from memory, the hardware prefetchers
  // alone fall behind on these R interleaved rows.
  const size_t tile_bytes = R * row_bytes;
  const size_t prefetch = (kPrefetchBytes + tile_bytes - 1) / tile_bytes * tile_bytes;
  Q23Unpacked<R> buf[kQ23BlockChunk];
  for (size_t r0 = 0; r0 < full_rows; r0 += R) {
    for (size_t b0 = 0; b0 < blocks; b0 += kQ23BlockChunk) {
      const size_t nb = blocks - b0 < kQ23BlockChunk ? blocks - b0 : kQ23BlockChunk;
      for (size_t b = 0; b < nb; ++b) {
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const uint8_t* blk = w + (r0 + r) * row_bytes + (b0 + b) * Tiles::kBlockBytes;
          prefetch_block<Tiles::kBlockBytes>(blk, prefetch);
          q23_unpack<kQ3>(blk, buf[b], r);
        }
      }
      size_t t0 = 0;
      for (; t0 + T <= passed_tokens; t0 += T) {
        q23_batch_pass<kQ3, R, 4>(buf, nb, b0, r0, x, t0, y, y_stride);
      }
      if (passed_tokens - t0 == 3) {
        q23_batch_pass<kQ3, R, 3>(buf, nb, b0, r0, x, t0, y, y_stride);
      }
    }
  }
  if (full_rows < rows) {
    dot_rows<Tiles>(w + full_rows * row_bytes, row_bytes, rows - full_rows, x, y + full_rows,
                    y_stride);
  }
  if (passed_tokens < x.n_tokens) {
    dot_rows<Tiles>(w, row_bytes, full_rows, row_range(x, passed_tokens, x.n_tokens),
                    y + passed_tokens * y_stride, y_stride);
  }
}

}  // namespace
}  // namespace tandem::kernels::detail
