// The SIMD dot products of Q2_K and Q3_K weights with Q8_K activations, bit-identical to the
// scalar references in quant_dot_kquants_scalar.cpp, as templates in the style of (and built on
// the tile helpers of) quant_dot_kquants_tiles.h: an ISA file includes that header, then this one.
//
// Both types hold 16 groups of 16 elements per super-block with their 2-bit quants laid out alike
// (element 128h + 32s + l at bits 2s, 2s + 1 of qs[32h + l]), so one 32-byte load of half h of qs
// gives, per s, groups 8h + 2s (lower 128 bits) and 8h + 2s + 1 (upper 128 bits) after a shift and
// a mask, as in Q6_K's steps. Q3_K's hmask bit 4h + s of byte l goes with the same byte lanes.
//
// Exactness: maddubs multiplies unsigned quants (Q2_K's q in 0..3; Q3_K's q + 4 in 0..7, the 2 low
// bits with the hmask bit as bit 2) by int8 activations, so its pair sums stay within
// 2 * 7 * 127 = 1778 (no saturation); the int16 group scales multiply them exactly in int32
// (madd or vpdpwssd). Q3_K's isum is then sum_g (scale_g - 32) * sum (q + 4) * xq minus
// 4 * sum_g (scale_g - 32) * bsums_g, which is exactly the reference's sum of q * xq * (scale_g -
// 32) since the bsums are the sums of the quants. Q2_K's imin is the madd of the bsums with the
// 16 mins. The float combine is the reference's, one (row, token) per SSE lane, as in
// quant_dot_kquants_tiles.h.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tandem::kernels::detail {

namespace {

constexpr size_t kQ2KBlockBytes = 84;   // scales[16], qs[64], f16 d, f16 dmin
constexpr size_t kQ3KBlockBytes = 110;  // hmask[32], qs[64], scales[12], f16 d

// Q3_K's 16 group scales minus 32 as int16, from the 12 packed bytes: group g's low nibble is
// nibble g / 8 of byte g % 8 (a0 = bytes 0-7), its top 2 bits bits 2 * (g / 4) of byte 8 + g % 4
// (a2 = bytes 8-11).
[[gnu::always_inline]] inline __m256i q3_k_scales(const uint8_t* packed) {
  uint64_t a0;
  std::memcpy(&a0, packed, sizeof(a0));
  const uint64_t a2 = load_u32(packed + 8);
  const uint64_t top_lo = (a2 & 0x03030303u) | (((a2 >> 2) & 0x03030303u) << 32);
  const uint64_t top_hi = ((a2 >> 4) & 0x03030303u) | (((a2 >> 6) & 0x03030303u) << 32);
  const uint64_t lo = (a0 & 0x0f0f0f0f0f0f0f0full) | (top_lo << 4);
  const uint64_t hi = ((a0 >> 4) & 0x0f0f0f0f0f0f0f0full) | (top_hi << 4);
  const __m128i s = _mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo));
  return _mm256_cvtepi8_epi16(_mm_sub_epi8(s, _mm_set1_epi8(32)));
}

// The unsigned quants of groups 2k (lower 128 bits) and 2k + 1 (upper), k = 4H + S, of a Q2_K
// (kQ3 false: q in 0..3) or Q3_K (q + 4 in 0..7, the hmask bit as bit 2) super-block. `qs` is
// half H of the quant bytes, `hmask` Q3_K's 32 hmask bytes.
template <bool kQ3, int H, int S>
[[gnu::always_inline]] inline __m256i q23_k_quants(__m256i qs, __m256i hmask) {
  // The 16-bit shifts carry bits across the bytes of a lane, but only into bits the masks drop.
  __m256i q = _mm256_and_si256(S == 0 ? qs : _mm256_srli_epi16(qs, 2 * S), _mm256_set1_epi8(3));
  if constexpr (kQ3) {
    constexpr int kBit = 4 * H + S;  // the hmask bit of these elements, moved to bit 2
    __m256i high;
    if constexpr (kBit < 2) {
      high = _mm256_slli_epi16(hmask, 2 - kBit);
    } else if constexpr (kBit == 2) {
      high = hmask;
    } else {
      high = _mm256_srli_epi16(hmask, kBit - 2);
    }
    q = _mm256_or_si256(q, _mm256_and_si256(high, _mm256_set1_epi8(4)));
  }
  return q;
}

// A Q2_K super-block's 16 group scales (low nibbles) and mins (high nibbles) as int16.
[[gnu::always_inline]] inline void q2_k_scales_mins(const uint8_t* blk, __m256i& scales,
                                                    __m256i& mins) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk));
  const __m128i low4 = _mm_set1_epi8(0x0f);
  scales = _mm256_cvtepu8_epi16(_mm_and_si128(bytes, low4));
  mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(bytes, 4), low4));
}

// Groups 2k and 2k + 1, k = 4H + S, of a Q2_K (kQ3 false) or Q3_K super-block: acc[t] += the
// products of the unsigned quants with token t times the group scales. `qs` is half H of the
// quant bytes, `hmask` Q3_K's 32 hmask bytes, `scales` the int16 group scales 8H..8H+7 in both
// 128-bit halves.
template <int T, bool kQ3, int H, int S>
[[gnu::always_inline]] inline void q23_k_step(__m256i qs, __m256i hmask, __m256i scales,
                                              const int8_t* const* xq, __m256i* acc) {
  add_scaled_products<T>(q23_k_quants<kQ3, H, S>(qs, hmask), group_pair_scales<S>(scales), xq,
                         128 * H + 32 * S, acc);
}

template <int T, bool kQ3, int H>
[[gnu::always_inline]] inline void q23_k_half(const uint8_t* qs, __m256i hmask, __m256i scales,
                                              const int8_t* const* xq, __m256i* acc) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * H));
  q23_k_step<T, kQ3, H, 0>(v, hmask, scales, xq, acc);
  q23_k_step<T, kQ3, H, 1>(v, hmask, scales, xq, acc);
  q23_k_step<T, kQ3, H, 2>(v, hmask, scales, xq, acc);
  q23_k_step<T, kQ3, H, 3>(v, hmask, scales, xq, acc);
}

// R rows x T tokens of Q2_K (kQ3 false) or Q3_K weights: out[i] = the dot product of lane i (row
// i / T at w + (i / T) * row_bytes, token i % T of g), for i < R * T.
template <int R, int T, bool kQ3>
void q23_k_tile(const uint8_t* w, size_t row_bytes, size_t blocks, const TokenGroup& g,
                size_t prefetch, float* out) {
  constexpr int kLanes = R * T;
  constexpr size_t kBlockBytes = kQ3 ? kQ3KBlockBytes : kQ2KBlockBytes;
  __m128 sum = _mm_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const int8_t* xq[T];
    const int16_t* bsums[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      xq[t] = g.qs[t] + b * kSuper;
      bsums[t] = g.bsums[t] + b * kSumsPerBlock;
    }
    __m256i acc[kLanes];
    [[maybe_unused]] __m256i min_parts[kLanes];  // Q2_K only
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w + r * row_bytes + b * kBlockBytes;
      if (prefetch != 0) prefetch_block<kBlockBytes>(blk, prefetch);
      __m256i sc16, hmask = _mm256_setzero_si256(), mins16 = _mm256_setzero_si256();
      if constexpr (kQ3) {
        sc16 = q3_k_scales(blk + 96);
        hmask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk));
      } else {
        q2_k_scales_mins(blk, sc16, mins16);
      }
      const uint8_t* qs = blk + (kQ3 ? 32 : 16);
      __m256i* row_acc = acc + r * T;
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) row_acc[t] = _mm256_setzero_si256();
      q23_k_half<T, kQ3, 0>(qs, hmask, _mm256_permute4x64_epi64(sc16, 0x44), xq, row_acc);
      q23_k_half<T, kQ3, 1>(qs, hmask, _mm256_permute4x64_epi64(sc16, 0xee), xq, row_acc);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums[t]));
        if constexpr (kQ3) {
          // 4 * (scale - 32) fits int16 (|.| <= 128); the madd stays far inside int32.
          row_acc[t] =
              _mm256_sub_epi32(row_acc[t], _mm256_madd_epi16(bs, _mm256_slli_epi16(sc16, 2)));
        } else {
          min_parts[r * T + t] = _mm256_madd_epi16(bs, mins16);
        }
      }
    }
    const __m128 isum = _mm_cvtepi32_ps(sum_lanes<kLanes>(acc));
    const __m128 dx = tile_dx<T>(g, b);
    if constexpr (kQ3) {
      // The reference's (dw * dx) * float(isum); sum += that.
      const __m128 dw = tile_fp16<R, T>(w, row_bytes, kBlockBytes, b, 108);
      sum = _mm_add_ps(sum, _mm_mul_ps(_mm_mul_ps(dw, dx), isum));
    } else {
      // The reference's ((dw * dx) * float(isum)) - ((dmin * dx) * float(imin)); sum += that.
      const __m128 imin = _mm_cvtepi32_ps(sum_lanes<kLanes>(min_parts));
      __m128 dw, dmin;
      tile_fp16_pair<R, T>(w, row_bytes, kBlockBytes, b, 80, dw, dmin);
      const __m128 term =
          _mm_sub_ps(_mm_mul_ps(_mm_mul_ps(dw, dx), isum), _mm_mul_ps(_mm_mul_ps(dmin, dx), imin));
      sum = _mm_add_ps(sum, term);
    }
  }
  _mm_storeu_ps(out, sum);
}

// The tile kernels of Q2_K (kQ3 false) or Q3_K, as dot_rows takes them.
template <bool kQ3>
struct Q23KTiles {
  static constexpr size_t kBlockBytes = kQ3 ? kQ3KBlockBytes : kQ2KBlockBytes;
  template <int R, int T>
  static void tile(const uint8_t* w, size_t row_bytes, size_t blocks, const TokenGroup& g,
                   size_t prefetch, float* out) {
    q23_k_tile<R, T, kQ3>(w, row_bytes, blocks, g, prefetch, out);
  }
};

}  // namespace
}  // namespace tandem::kernels::detail
