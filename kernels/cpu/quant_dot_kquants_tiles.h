// The SIMD dot products of K-quant weights (Q4_K, Q5_K, Q6_K) with Q8_K activations, bit-identical
// to the scalar references in quant_dot_kquants_scalar.cpp, as templates that each ISA file
// (quant_dot_kquants_avx2.cpp, quant_dot_kquants_avx512_vnni.cpp) instantiates under its own -m
// flags. Before including this header a file defines, in tandem::kernels::detail's anonymous
// namespace, `__m256i kq_madd_add(__m256i acc, __m256i p, __m256i s)`: acc + the int32 sums of
// the int16 pair products p * s (AVX2: add + madd; VNNI: one vpdpwssd, the same exact sum).
//
// These files are linked into binaries that run on any x86-64 CPU, so everything here lives in
// an anonymous namespace and nothing inline or templated is shared with other files (no std::
// algorithms or containers, no project header helpers): a shared inline could otherwise be
// emitted with AVX2 or AVX-512 instructions and chosen by the linker for code that runs on older
// CPUs.
//
// Exactness: each super-block's integer parts (isum, imin) are computed exactly in int32 lanes
// (maddubs pair sums cannot saturate: |q| <= 63 after Q6_K's +32, so <= 2 * 63 * 127 = 16002 <
// 32767), reduced to one int32 per (row, token), and then combined with the very float operations
// of the reference, one (row, token) per SSE lane: lane-wise IEEE mul/sub/add round exactly as
// the scalar ones do, and cvtdq2ps rounds as the scalar int -> float conversion does under the
// same MXCSR. Each lane accumulates its own sum in block order, as the reference does.
//
// Speed (AVX2 on Zen3, one core): the vector pipes, not the loads, bound the integer part, so the
// work per super-block outside the 16 multiplies is kept small and shared:
//  - a tile of R rows x T tokens (R * T <= 4: 4 x 1, 2 x 2, 1 x 3, 1 x 4) shares one horizontal
//    reduction and one 4-lane float combine per super-block; with T > 1 each weight block is
//    unpacked once into registers and used for all T tokens (register blocking);
//  - with more than 4 tokens, rows go in chunks of about kChunkBytes, so that the chunk's weights
//    stay in L1/L2 while every token group passes over them;
//  - weights are prefetched kPrefetchBytes ahead (see there).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/activation_rows.h"

namespace tandem::kernels::detail {

namespace {

constexpr size_t kSuper = 256;          // elements per super-block
constexpr size_t kSumsPerBlock = 16;    // Q8_K bsums per super-block
constexpr size_t kQ4KBlockBytes = 144;  // f16 d, f16 dmin, scales[12], qs[128]
constexpr size_t kQ5KBlockBytes = 176;  // f16 d, f16 dmin, scales[12], qh[32], qs[128]
constexpr size_t kQ6KBlockBytes = 210;  // ql[128], qh[64], int8 scales[16], f16 d
constexpr size_t kMaxTokens = 4;        // tokens sharing one unpacked weight block
constexpr size_t kChunkBytes = 16384;   // weight bytes per row chunk (see the file comment)
// How far ahead of its reads a tile prefetches weights. The hardware prefetchers alone leave a
// single core well below its DRAM read rate on the interleaved rows of a tile (measured on Zen3:
// Q4_K 768 x 2048, one token, 7 -> 12 GB/s). For every type, Q6_K included: in the whole model
// (tandem bench, the Q4_K_M bench model, 2 threads) prefetching Q6_K too took decode from 16 to
// 21-24 tokens/s; 4, 8 and 16 KiB ahead measured the same within noise.
constexpr size_t kPrefetchBytes = 8192;

// The activation rows of a group of 1..kMaxTokens tokens; entries past the group's size repeat
// its last token (never used for results, but valid to read).
struct TokenGroup {
  const int8_t* qs[kMaxTokens];
  const float* d[kMaxTokens];
  const int16_t* bsums[kMaxTokens];
};

TokenGroup token_group(const ActivationRows& x, size_t t0, size_t count) {
  const size_t blocks = x.cols / kSuper;
  TokenGroup g;
  for (size_t i = 0; i < kMaxTokens; ++i) {
    const size_t t = t0 + (i < count ? i : count - 1);
    g.qs[i] = x.qs + t * x.cols;
    g.d[i] = x.d + t * blocks;
    g.bsums[i] = x.bsums + t * blocks * kSumsPerBlock;
  }
  return g;
}

// A tile is R weight rows x T tokens (R * T <= 4) whose dot products share the per-block
// reduction and float combine: lane i of a tile's vectors is row i / T, token i % T.

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Lane i = the activation scale of token i % T at super-block b (lanes past R * T: don't care).
template <int T>
[[gnu::always_inline]] inline __m128 tile_dx(const TokenGroup& g, size_t b) {
  if constexpr (T == 1) {
    return _mm_set1_ps(g.d[0][b]);
  } else if constexpr (T == 2) {
    return _mm_setr_ps(g.d[0][b], g.d[1][b], g.d[0][b], g.d[1][b]);
  } else {
    return _mm_setr_ps(g.d[0][b], g.d[1][b], g.d[2][b], g.d[3][b]);
  }
}

// Lane i = the exact int32 sum of the 8 lanes of v[i], for i < L (other lanes: don't care).
// Integer adds wrap, so each lane is exact whenever its true sum fits in int32.
template <int L>
[[gnu::always_inline]] inline __m128i sum_lanes(const __m256i* v) {
  __m256i h;
  if constexpr (L == 1) {
    h = _mm256_hadd_epi32(v[0], v[0]);
    h = _mm256_hadd_epi32(h, h);
  } else if constexpr (L == 2) {
    h = _mm256_hadd_epi32(v[0], v[1]);
    h = _mm256_hadd_epi32(h, h);
  } else if constexpr (L == 3) {
    h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[2]));
  } else {
    h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  }
  // Each half now holds lane i's sum over that half's 4 elements.
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// As above for 4-lane vectors.
template <int L>
[[gnu::always_inline]] inline __m128i sum_lanes(const __m128i* v) {
  if constexpr (L == 1) {
    const __m128i h = _mm_hadd_epi32(v[0], v[0]);
    return _mm_hadd_epi32(h, h);
  } else if constexpr (L == 2) {
    const __m128i h = _mm_hadd_epi32(v[0], v[1]);
    return _mm_hadd_epi32(h, h);
  } else if constexpr (L == 3) {
    return _mm_hadd_epi32(_mm_hadd_epi32(v[0], v[1]), _mm_hadd_epi32(v[2], v[2]));
  } else {
    return _mm_hadd_epi32(_mm_hadd_epi32(v[0], v[1]), _mm_hadd_epi32(v[2], v[3]));
  }
}

// The 32-bit word at byte `offset` of super-block b of each of the tile's rows, one per lane
// (row i / T), as 4 x 32 bits.
template <int R, int T>
[[gnu::always_inline]] inline __m128i tile_words(const uint8_t* w, size_t row_bytes,
                                                 size_t block_bytes, size_t b, size_t offset) {
  uint64_t lane[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const int r = (i < R * T ? i : R * T - 1) / T;
    lane[i] = load_u32(w + r * row_bytes + b * block_bytes + offset);
  }
  return _mm_set_epi64x(static_cast<int64_t>(lane[2] | (lane[3] << 32)),
                        static_cast<int64_t>(lane[0] | (lane[1] << 32)));
}

// The fp16 at byte `offset` of super-block b of each lane's row (row i / T) converted exactly
// (lanes past R * T: don't care).
template <int R, int T>
[[gnu::always_inline]] inline __m128 tile_fp16(const uint8_t* w, size_t row_bytes,
                                               size_t block_bytes, size_t b, size_t offset) {
  constexpr int kLanes = R * T;
  if constexpr (kLanes == 1) {
    return _mm_cvtph_ps(_mm_cvtsi32_si128(load_u16(w + b * block_bytes + offset)));
  } else {
    uint64_t bits = 0;
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const int r = (i < kLanes ? i : kLanes - 1) / T;
      bits |= static_cast<uint64_t>(load_u16(w + r * row_bytes + b * block_bytes + offset))
              << (16 * i);
    }
    return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(bits)));
  }
}

// The same for the two fp16 values at `offset` and offset + 2 (a K-quant's d and dmin): lane i of
// first / second, converted exactly.
template <int R, int T>
[[gnu::always_inline]] inline void tile_fp16_pair(const uint8_t* w, size_t row_bytes,
                                                  size_t block_bytes, size_t b, size_t offset,
                                                  __m128& first, __m128& second) {
  if constexpr (R * T == 1) {
    first =
        _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(load_u32(w + b * block_bytes + offset))));
    second = _mm_movehdup_ps(first);
  } else {
    const __m256 f = _mm256_cvtph_ps(tile_words<R, T>(w, row_bytes, block_bytes, b, offset));
    const __m128 lo = _mm256_castps256_ps128(f), hi = _mm256_extractf128_ps(f, 1);
    first = _mm_shuffle_ps(lo, hi, 0x88);
    second = _mm_shuffle_ps(lo, hi, 0xdd);
  }
}

// Forces v to be computed here, in a register: without it GCC's expansion (TER) sinks each
// accumulator's adds to the end of the super-block, keeping every product live and spilling.
[[gnu::always_inline]] inline void keep_in_register(__m256i& v) {
  asm("" : "+x"(v));
}

// Prefetches the kBlockBytes at p + ahead into L1. Prefetches never fault, so the address may lie
// past the end of the weights (it is formed as an integer for that reason).
template <size_t kBlockBytes>
[[gnu::always_inline]] inline void prefetch_block(const uint8_t* p, size_t ahead) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) + ahead;
#pragma GCC unroll 4
  for (size_t off = 0; off < kBlockBytes; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(a + off), _MM_HINT_T0);
  }
}

// ---- Q4_K / Q5_K.

// The 8 scales of a super-block as bytes in the low 8 bytes of both 128-bit halves, and its 8
// mins as int16. Per byte lane of the 12 packed bytes read as little-endian words a0, a1, a2:
// scales 0-3 (mins 0-3) are the low 6 bits of a0 (a1); scales 4-7 (mins 4-7) take their low
// nibble from the low (high) nibble of a2 and their top 2 bits from the top bits of a0 (a1).
struct ScalesMins {
  __m256i scales;
  __m128i mins;
};

[[gnu::always_inline]] inline ScalesMins q45_k_scales(const uint8_t* packed) {
  uint64_t a01;
  std::memcpy(&a01, packed, sizeof(a01));
  const uint64_t a0 = a01 & 0xffffffffu, a1 = a01 >> 32, a2 = load_u32(packed + 8);
  const uint64_t scales =
      (a0 & 0x3f3f3f3fu) | (((a2 & 0x0f0f0f0fu) | ((a0 >> 2) & 0x30303030u)) << 32);
  const uint64_t mins =
      (a1 & 0x3f3f3f3fu) | ((((a2 >> 4) & 0x0f0f0f0fu) | ((a1 >> 2) & 0x30303030u)) << 32);
  return {_mm256_broadcastq_epi64(_mm_cvtsi64_si128(static_cast<int64_t>(scales))),
          _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mins)))};
}

// Scale j (a byte of ScalesMins::scales) zero-extended into every int16 lane: a pshufb control
// of (index j, 0x80 = zero) pairs.
[[gnu::always_inline]] inline __m256i scale_of(__m256i scales, int j) {
  return _mm256_shuffle_epi8(scales, _mm256_set1_epi16(static_cast<int16_t>(-32768 + j)));
}

// The fifth bit of Q5_K sub-block J (bit J of each qh byte) moved to bit 4 of each byte. The
// 16-bit shifts carry bits across the bytes of a lane, but only into positions the mask drops.
template <int J>
[[gnu::always_inline]] inline __m256i q5_high_bit(__m256i qh) {
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  if constexpr (J < 4) {
    return _mm256_and_si256(_mm256_slli_epi16(qh, 4 - J), bit4);
  } else if constexpr (J == 4) {
    return _mm256_and_si256(qh, bit4);
  } else {
    return _mm256_and_si256(_mm256_srli_epi16(qh, J - 4), bit4);
  }
}

// 64 elements C (sub-blocks 2C and 2C + 1) of a Q4_K / Q5_K super-block: acc[t] += the scaled
// quant products with token t.
template <int T, bool kQ5, int C>
[[gnu::always_inline]] inline void q45_k_step(const uint8_t* qs, __m256i qh, __m256i scales,
                                              const int8_t* const* xq, __m256i* acc) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * C));
  __m256i lo = _mm256_and_si256(v, low4);
  __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
  if constexpr (kQ5) {
    lo = _mm256_or_si256(lo, q5_high_bit<2 * C>(qh));
    hi = _mm256_or_si256(hi, q5_high_bit<2 * C + 1>(qh));
  }
  const __m256i s_lo = scale_of(scales, 2 * C);
  const __m256i s_hi = scale_of(scales, 2 * C + 1);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const int8_t* x = xq[t] + 64 * C;
    const __m256i p_lo =
        _mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
    const __m256i p_hi =
        _mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32)));
    acc[t] = kq_madd_add(acc[t], p_lo, s_lo);
    acc[t] = kq_madd_add(acc[t], p_hi, s_hi);
    keep_in_register(acc[t]);
  }
}

// R rows x T tokens of Q4_K (kQ5 false) or Q5_K weights: out[i] = the dot product of lane i
// (row i / T at w + (i / T) * row_bytes, token i % T of g), for i < R * T.
template <int R, int T, bool kQ5>
void q45_k_tile(const uint8_t* w, size_t row_bytes, size_t blocks, const TokenGroup& g,
                size_t prefetch, float* out) {
  constexpr int kLanes = R * T;
  constexpr size_t kBlockBytes = kQ5 ? kQ5KBlockBytes : kQ4KBlockBytes;
  __m128 sum = _mm_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const int8_t* xq[T];
    __m128i bsum_pairs[T];  // bsums[2j] + bsums[2j + 1] (|.| <= 2 * 2032, no overflow)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      xq[t] = g.qs[t] + b * kSuper;
      const int16_t* bs = g.bsums[t] + b * kSumsPerBlock;
      bsum_pairs[t] = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bs)),
                                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(bs + 8)));
    }
    __m256i acc[kLanes];
    __m128i min_parts[kLanes];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w + r * row_bytes + b * kBlockBytes;
      if (prefetch != 0) prefetch_block<kBlockBytes>(blk, prefetch);
      const ScalesMins sm = q45_k_scales(blk + 4);
      const uint8_t* qs = blk + (kQ5 ? 48 : 16);
      const __m256i qh = kQ5 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16))
                             : _mm256_setzero_si256();
      __m256i* row_acc = acc + r * T;
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) row_acc[t] = _mm256_setzero_si256();
      q45_k_step<T, kQ5, 0>(qs, qh, sm.scales, xq, row_acc);
      q45_k_step<T, kQ5, 1>(qs, qh, sm.scales, xq, row_acc);
      q45_k_step<T, kQ5, 2>(qs, qh, sm.scales, xq, row_acc);
      q45_k_step<T, kQ5, 3>(qs, qh, sm.scales, xq, row_acc);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) min_parts[r * T + t] = _mm_madd_epi16(bsum_pairs[t], sm.mins);
    }
    const __m128 isum = _mm_cvtepi32_ps(sum_lanes<kLanes>(acc));
    const __m128 imin = _mm_cvtepi32_ps(sum_lanes<kLanes>(min_parts));
    __m128 dw, dmin;
    tile_fp16_pair<R, T>(w, row_bytes, kBlockBytes, b, 0, dw, dmin);
    const __m128 dx = tile_dx<T>(g, b);
    // The reference's ((dw * dx) * float(isum)) - ((dmin * dx) * float(imin)); sum += that.
    const __m128 term =
        _mm_sub_ps(_mm_mul_ps(_mm_mul_ps(dw, dx), isum), _mm_mul_ps(_mm_mul_ps(dmin, dx), imin));
    sum = _mm_add_ps(sum, term);
  }
  _mm_storeu_ps(out, sum);
}

// ---- Q6_K.

// Int16 lane 2S of `scales` in every int16 lane of the lower 128 bits, lane 2S + 1 in the upper:
// the scales of the two 16-element groups a 32-byte quant vector holds.
template <int S>
[[gnu::always_inline]] inline __m256i group_pair_scales(__m256i scales) {
  const __m256i ctl = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(0x0302 + 0x0404 * S)),
                                       _mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0404 * S)));
  return _mm256_shuffle_epi8(scales, ctl);
}

// acc[t] += the exact int32 sums of the products of the unsigned quants q (each below 128) with
// the 32 activation quants at xq[t] + offset, times the int16 scales s of their pairs.
template <int T>
[[gnu::always_inline]] inline void add_scaled_products(__m256i q, __m256i s,
                                                       const int8_t* const* xq, size_t offset,
                                                       __m256i* acc) {
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const __m256i p = _mm256_maddubs_epi16(
        q, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[t] + offset)));
    acc[t] = kq_madd_add(acc[t], p, s);
    keep_in_register(acc[t]);
  }
}

// 32 elements at 128 * H + 32 * S of a Q6_K super-block (16-element groups 2k and 2k + 1,
// k = 4H + S): acc[t] += the products of (q + 32) in 0..63 with token t, times the group scales.
// `scales` holds the int16 group scales 8H..8H+7 in both halves.
template <int T, int S>
[[gnu::always_inline]] inline void q6_k_step(__m256i ql0, __m256i ql1, __m256i qh, __m256i scales,
                                             const int8_t* const* xq, __m256i* acc) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i bits45 = _mm256_set1_epi8(0x30);
  // Low nibble: ql0 / ql1 (S even / odd), low or high nibble (S < 2 / S >= 2); high two bits:
  // bits 2S, 2S + 1 of qh moved to bits 4, 5 (the masks drop what the 16-bit shifts carry over).
  const __m256i ql = (S % 2 == 0) ? ql0 : ql1;
  const __m256i low = _mm256_and_si256(S < 2 ? ql : _mm256_srli_epi16(ql, 4), low4);
  __m256i high;
  if constexpr (S == 0) {
    high = _mm256_slli_epi16(qh, 4);
  } else if constexpr (S == 1) {
    high = _mm256_slli_epi16(qh, 2);
  } else if constexpr (S == 2) {
    high = qh;
  } else {
    high = _mm256_srli_epi16(qh, 2);
  }
  const __m256i q = _mm256_or_si256(low, _mm256_and_si256(high, bits45));
  add_scaled_products<T>(q, group_pair_scales<S>(scales), xq, 32 * S, acc);
}

template <int T, int H>
[[gnu::always_inline]] inline void q6_k_half(const uint8_t* blk, __m256i scales,
                                             const int8_t* const* xq_block, __m256i* acc) {
  const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * H));
  const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * H + 32));
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * H));
  const int8_t* xq[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) xq[t] = xq_block[t] + 128 * H;
  q6_k_step<T, 0>(ql0, ql1, qh, scales, xq, acc);
  q6_k_step<T, 1>(ql0, ql1, qh, scales, xq, acc);
  q6_k_step<T, 2>(ql0, ql1, qh, scales, xq, acc);
  q6_k_step<T, 3>(ql0, ql1, qh, scales, xq, acc);
}

// R rows x T tokens of a type whose super-block term is the reference's (dw * dx) * float(isum)
// (Q6_K, IQ4_XS), as q45_k_tile. Rows gives kBlockBytes, kDOffset (the byte of the block's fp16
// d) and row_isums<T>(blk, xq, g, b, acc): acc[t] = int32 lanes that sum to the exact isum of the
// super-block at blk with token t of g (quants xq[t], super-block b).
template <typename Rows, int R, int T>
void d_isum_tile(const uint8_t* w, size_t row_bytes, size_t blocks, const TokenGroup& g,
                 size_t prefetch, float* out) {
  constexpr int kLanes = R * T;
  __m128 sum = _mm_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const int8_t* xq[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) xq[t] = g.qs[t] + b * kSuper;
    __m256i acc[kLanes];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w + r * row_bytes + b * Rows::kBlockBytes;
      if (prefetch != 0) prefetch_block<Rows::kBlockBytes>(blk, prefetch);
      Rows::template row_isums<T>(blk, xq, g, b, acc + r * T);
    }
    const __m128 isum = _mm_cvtepi32_ps(sum_lanes<kLanes>(acc));
    const __m128 dw = tile_fp16<R, T>(w, row_bytes, Rows::kBlockBytes, b, Rows::kDOffset);
    // The reference's (dw * dx) * float(isum); sum += that.
    sum = _mm_add_ps(sum, _mm_mul_ps(_mm_mul_ps(dw, tile_dx<T>(g, b)), isum));
  }
  _mm_storeu_ps(out, sum);
}

// Q6_K's isum per row and token: sum (q + 32) * xq * scale - 32 * sum_g scale_g * bsums_g; the
// bsums are the sums of the quants (activation_rows.h), so this is exactly the reference's sum of
// q * xq * scale.
struct Q6KRows {
  static constexpr size_t kBlockBytes = kQ6KBlockBytes;
  static constexpr size_t kDOffset = 208;

  template <int T>
  [[gnu::always_inline]] static void row_isums(const uint8_t* blk, const int8_t* const* xq,
                                               const TokenGroup& g, size_t b, __m256i* acc) {
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_si256();
    q6_k_half<T, 0>(blk, _mm256_permute4x64_epi64(sc16, 0x44), xq, acc);
    q6_k_half<T, 1>(blk, _mm256_permute4x64_epi64(sc16, 0xee), xq, acc);
    // 32 * scale fits int16 (|.| <= 4096); madd with the bsums stays far inside int32.
    const __m256i sc32 = _mm256_slli_epi16(sc16, 5);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m256i bs =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.bsums[t] + b * kSumsPerBlock));
      acc[t] = _mm256_sub_epi32(acc[t], _mm256_madd_epi16(bs, sc32));
    }
  }
};

// The tile kernels of one weight type.
struct Q4KTiles {
  static constexpr size_t kBlockBytes = kQ4KBlockBytes;
  template <int R, int T>
  static void tile(const uint8_t* w, size_t row_bytes, size_t blocks, const TokenGroup& g,
                   size_t prefetch, float* out) {
    q45_k_tile<R, T, false>(w, row_bytes, blocks, g, prefetch, out);
  }
};

struct Q5KTiles {
  static constexpr size_t kBlockBytes = kQ5KBlockBytes;
  template <int R, int T>
  static void tile(const uint8_t* w, size_t row_bytes, size_t blocks, const TokenGroup& g,
                   size_t prefetch, float* out) {
    q45_k_tile<R, T, true>(w, row_bytes, blocks, g, prefetch, out);
  }
};

// The tiles of a d_isum_tile type.
template <typename Rows>
struct DIsumTiles {
  static constexpr size_t kBlockBytes = Rows::kBlockBytes;
  template <int R, int T>
  static void tile(const uint8_t* w, size_t row_bytes, size_t blocks, const TokenGroup& g,
                   size_t prefetch, float* out) {
    d_isum_tile<Rows, R, T>(w, row_bytes, blocks, g, prefetch, out);
  }
};

using Q6KTiles = DIsumTiles<Q6KRows>;

// Rows [r0, r1) against the T tokens of g (tokens t0..t0 + T - 1) in tiles of R rows, the
// remainder one row at a time.
template <typename Tiles, int R, int T>
void dot_tiles(const uint8_t* w, size_t row_bytes, size_t r0, size_t r1, size_t blocks,
               const TokenGroup& g, size_t t0, float* y, size_t y_stride) {
  // Prefetch the weights about kPrefetchBytes ahead in memory, a whole number of tiles ahead so
  // that each block's prefetch lands on the block that tile will read at the same position.
  const size_t tile_bytes = R * row_bytes;
  const size_t prefetch = (kPrefetchBytes + tile_bytes - 1) / tile_bytes * tile_bytes;
  float out[4];
  size_t r = r0;
  for (; r + R <= r1; r += R) {
    Tiles::template tile<R, T>(w + r * row_bytes, row_bytes, blocks, g, prefetch, out);
#pragma GCC unroll 4
    for (int i = 0; i < R * T; ++i) y[(t0 + i % T) * y_stride + r + i / T] = out[i];
  }
  for (; r < r1; ++r) {
    Tiles::template tile<1, T>(w + r * row_bytes, row_bytes, blocks, g, prefetch, out);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) y[(t0 + t) * y_stride + r] = out[t];
  }
}

// The QuantDotFn contract for a weight type's tiles: rows in chunks (when there are more tokens
// than one group), groups of up to 4 tokens over each chunk. A lone token runs 4-row tiles, a
// pair 2-row tiles, 3 or 4 tokens 1-row tiles.
template <typename Tiles>
void dot_rows(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x, float* y,
              size_t y_stride) {
  const size_t blocks = x.cols / kSuper;
  size_t chunk = rows;
  if (x.n_tokens > kMaxTokens && blocks > 0) {
    chunk = (kChunkBytes / (blocks * Tiles::kBlockBytes)) & ~size_t{3};
    if (chunk == 0) chunk = 4;
  }
  for (size_t r0 = 0; r0 < rows; r0 += chunk) {
    const size_t r1 = rows - r0 > chunk ? r0 + chunk : rows;
    for (size_t t0 = 0; t0 < x.n_tokens; t0 += kMaxTokens) {
      const size_t count = x.n_tokens - t0 < kMaxTokens ? x.n_tokens - t0 : kMaxTokens;
      const TokenGroup g = token_group(x, t0, count);
      switch (count) {
        case 1:
          dot_tiles<Tiles, 4, 1>(w, row_bytes, r0, r1, blocks, g, t0, y, y_stride);
          break;
        case 2:
          dot_tiles<Tiles, 2, 2>(w, row_bytes, r0, r1, blocks, g, t0, y, y_stride);
          break;
        case 3:
          dot_tiles<Tiles, 1, 3>(w, row_bytes, r0, r1, blocks, g, t0, y, y_stride);
          break;
        default:
          dot_tiles<Tiles, 1, 4>(w, row_bytes, r0, r1, blocks, g, t0, y, y_stride);
          break;
      }
    }
  }
}

}  // namespace
}  // namespace tandem::kernels::detail
