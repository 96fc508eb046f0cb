// AVX2 (+FMA +F16C) dot products of Q8_0, Q4_0, Q5_0, MXFP4 and IQ4_NL weights with Q8_0
// activations,
// bit-identical to the scalar references in quant_dot_legacy_scalar.cpp.
//
// Built with -mavx2 -mfma -mf16c -ffp-contract=off but linked into binaries that run on any x86-64:
// everything except the exported dot_*_avx2 functions is in the anonymous namespace, and nothing
// inline or templated is shared with other files (no std:: helpers, no project inline functions),
// so no AVX2 code can be picked by the linker for a caller on another CPU.
//
// Technique: one lane per weight row. Eight rows are processed at once; each row's 32-element
// block is unpacked to unsigned bytes u = q + kBias (Q4_0: the nibble itself, bias 8; MXFP4: the
// doubled E2M1 value plus 12), multiplied with the signed activation bytes (maddubs), and the
// eight rows' block sums are gathered into one vector of int32 lanes. Subtracting kBias * sum(x)
// (precomputed per activation block) gives the exact isum of every row. Then, lane-wise and in
// block order, term = float(isum) * scale and acc = acc + term as separate instructions: the
// scalar reference's float operations for each row. Several tokens share each unpacked weight
// block (register blocking over tokens). IQ4_NL's values (-127..113) span too much for a biased
// byte (maddubs would saturate), so its rows are unpacked to the signed values themselves and
// multiplied as |x| (unsigned) times the value with x's sign. Q8_0's quants (-128..127, read as
// they are) go the other way round, |q| times x with q's sign: a file may hold q = -128 (|q| = 128
// is a valid unsigned byte) while the activation quantizer never makes x = -128.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/avx2_store_lanes.h"
#include "kernels/cpu/prefetch_ahead.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/quant_dot_legacy_walk.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kGroupRows = 8;
// Activation blocks whose bias sums fit on the stack (16 KiB); larger inputs use the heap.

// The 16-bit little-endian value at p (any alignment).
uint64_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Two rows' nibbles in one register pair. A row pair (a, b) holds row a in the low 128 bits and
// row b in the high 128 bits; lo has the low nibbles (elements 0..15 of each row) and hi the high
// nibbles (elements 16..31), as unsigned bytes 0..15.
struct NibblePair {
  __m256i lo;
  __m256i hi;
};

NibblePair load_nibbles(const uint8_t* qs_a, const uint8_t* qs_b) {
  const __m256i v = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs_a))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs_b)), 1);
  const __m256i mask = _mm256_set1_epi8(0x0f);
  return {_mm256_and_si256(v, mask), _mm256_and_si256(_mm256_srli_epi16(v, 4), mask)};
}

// As load_nibbles, each nibble then replaced by its entry of `table` (16 bytes in both 128-bit
// halves): MXFP4's and IQ4_NL's values.
NibblePair load_table_values(const uint8_t* qs_a, const uint8_t* qs_b, __m256i table) {
  const NibblePair q = load_nibbles(qs_a, qs_b);
  return {_mm256_shuffle_epi8(table, q.lo), _mm256_shuffle_epi8(table, q.hi)};
}

// Q4_0: block = f16 d, 16 nibble bytes; u = q (0..15) = (q - 8) + 8; scale order dw * dx.
struct Q4_0 {
  static constexpr size_t kBytes = 18;
  static constexpr int32_t kBias = 8;

  static NibblePair unpack(const uint8_t* block_a, const uint8_t* block_b) {
    return load_nibbles(block_a + 2, block_b + 2);
  }

  // The eight rows' dw of the block at byte offset `off`: the halves are packed with scalar
  // shifts (off the vector ports) and converted with vcvtph2ps (exact for every half).
  static __m256 scales(const uint8_t* const p[kGroupRows], size_t off) {
    const uint64_t lo = load_u16(p[0] + off) | load_u16(p[1] + off) << 16 |
                        load_u16(p[2] + off) << 32 | load_u16(p[3] + off) << 48;
    const uint64_t hi = load_u16(p[4] + off) | load_u16(p[5] + off) << 16 |
                        load_u16(p[6] + off) << 32 | load_u16(p[7] + off) << 48;
    return _mm256_cvtph_ps(_mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo)));
  }
};

// Q8_0: block = f16 d, 32 int8 quants; kSignedWeights: unpack gives the quants themselves
// (elements 0..15 in lo, 16..31 in hi), no bias; scale order dw * dx as Q4_0.
struct Q8_0 {
  static constexpr size_t kBytes = 34;
  static constexpr int32_t kBias = 0;
  static constexpr bool kSignedWeights = true;

  static NibblePair unpack(const uint8_t* block_a, const uint8_t* block_b) {
    const auto pair = [](const uint8_t* a, const uint8_t* b) {
      return _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
    };
    return {pair(block_a + 2, block_b + 2), pair(block_a + 18, block_b + 18)};
  }

  static __m256 scales(const uint8_t* const p[kGroupRows], size_t off) {
    return Q4_0::scales(p, off);
  }
};

// Q5_0: block = f16 d, 4 bytes qh, 16 nibble bytes; u = nibble | high bit << 4 (0..31) = q + 16;
// scale order dw * dx as Q4_0. With u <= 31 every stage of the sums below stays in range
// (8-element sums <= 8 * 31 * 128 = 31744 < 32767 for the int16 pack).
struct Q5_0 {
  static constexpr size_t kBytes = 22;
  static constexpr int32_t kBias = 16;

  // 16 bits of qh as 16 bytes, 0x10 where the bit is set (byte j <- bit j).
  static __m128i high_bits(uint32_t bits16) {
    const __m128i v = _mm_set1_epi16(static_cast<short>(bits16));
    const __m128i bytes =
        _mm_shuffle_epi8(v, _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
    const __m128i select =
        _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    const __m128i hit = _mm_cmpeq_epi8(_mm_and_si128(bytes, select), select);
    return _mm_and_si128(hit, _mm_set1_epi8(0x10));
  }

  static uint32_t load_qh(const uint8_t* block) {
    uint32_t qh;
    std::memcpy(&qh, block + 2, 4);
    return qh;
  }

  static NibblePair unpack(const uint8_t* block_a, const uint8_t* block_b) {
    const NibblePair q = load_nibbles(block_a + 6, block_b + 6);
    const uint32_t qa = load_qh(block_a);
    const uint32_t qb = load_qh(block_b);
    const __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(high_bits(qa & 0xffff)),
                                               high_bits(qb & 0xffff), 1);
    const __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(high_bits(qa >> 16)),
                                               high_bits(qb >> 16), 1);
    return {_mm256_or_si256(q.lo, lo), _mm256_or_si256(q.hi, hi)};
  }

  static __m256 scales(const uint8_t* const p[kGroupRows], size_t off) {
    return Q4_0::scales(p, off);
  }
};

// MXFP4: block = uint8 e, 16 nibble bytes; u = kMxfp4Values[q] + 12 (0..24) by table lookup; the
// weight scale is de = 2^(e - 128) (the scalar reference's dx * de equals de * dx: IEEE
// multiplication is commutative).
struct Mxfp4 {
  static constexpr size_t kBytes = 17;
  static constexpr int32_t kBias = 12;

  static NibblePair unpack(const uint8_t* block_a, const uint8_t* block_b) {
    // The doubled E2M1 values plus 12, indexed by the 4-bit code, in both 128-bit halves.
    const __m256i biased_values =
        _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,  //
                         12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
    return load_table_values(block_a + 1, block_b + 1, biased_values);
  }

  // The eight rows' de: e >= 2 is the normal float with biased exponent e - 1; e = 0 and 1 are the
  // subnormals 2^-128 and 2^-127 (0x00200000 << e); e = 255 gives 2^127, as the scalar code.
  static __m256 scales(const uint8_t* const p[kGroupRows], size_t off) {
    const uint64_t e8 =
        static_cast<uint64_t>(p[0][off]) | static_cast<uint64_t>(p[1][off]) << 8 |
        static_cast<uint64_t>(p[2][off]) << 16 | static_cast<uint64_t>(p[3][off]) << 24 |
        static_cast<uint64_t>(p[4][off]) << 32 | static_cast<uint64_t>(p[5][off]) << 40 |
        static_cast<uint64_t>(p[6][off]) << 48 | static_cast<uint64_t>(p[7][off]) << 56;
    const __m256i e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(e8)));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i is_normal = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(subnormal, normal, is_normal));
  }
};

// IQ4_NL: block = f16 d, 16 nibble bytes; kSignedValues: unpack gives the values kIq4Values[q]
// themselves (-127..113) by table lookup, with no bias; scale order dw * dx as Q4_0.
struct Iq4Nl {
  static constexpr size_t kBytes = 18;
  static constexpr int32_t kBias = 0;
  static constexpr bool kSignedValues = true;

  static NibblePair unpack(const uint8_t* block_a, const uint8_t* block_b) {
    const __m256i values = _mm256_setr_epi8(
        -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,  //
        -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
    return load_table_values(block_a + 2, block_b + 2, values);
  }

  static __m256 scales(const uint8_t* const p[kGroupRows], size_t off) {
    return Q4_0::scales(p, off);
  }
};

// Whether Fmt's unpack gives signed values (rather than unsigned u = q + kBias), multiplied as |x|
// times the value with x's sign.
template <typename Fmt>
constexpr bool signed_values() {
  if constexpr (requires { Fmt::kSignedValues; }) {
    return Fmt::kSignedValues;
  } else {
    return false;
  }
}

// Whether Fmt's unpack gives signed weight quants, multiplied as |q| times x with q's sign.
template <typename Fmt>
constexpr bool signed_weights() {
  if constexpr (requires { Fmt::kSignedWeights; }) {
    return Fmt::kSignedWeights;
  } else {
    return false;
  }
}

// One token's activation block in the row-pair layout: elements 0..15 (lo) and 16..31 (hi), each
// in both 128-bit halves.
struct ActivationPair {
  __m256i lo;
  __m256i hi;
};

ActivationPair load_activations(const int8_t* xq) {
  return {_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xq))),
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xq + 16)))};
}

// The exact block sums are formed in stages that keep every intermediate in range:
//  pair_sums: a row pair times one token. maddubs of lo and hi and an int16 add give 4-element
//    sums of u * x: with u <= 31 (Q5_0; 24 for MXFP4, 15 for Q4_0) and |x| <= 128,
//    |u * x| <= 3968, so maddubs' 2-element sums (<= 7936) never saturate and the 4-element sums
//    are <= 15872. madd with ones then gives
//    int32 lanes of 8-element sums, 4 per row: [a a a a | b b b b].
//  quad_sums: pairs (i, i + 4) and (j, j + 4) packed to int16 (exact: |8-element sum| <= 31744)
//    and summed by madd: int32 lanes [ri ri rj rj | ri+4 ri+4 rj+4 rj+4] of 16-element sums.
//  row_sums: hadd of quad_sums (0, 1) and (2, 3): lane r = row r's whole 32-element sum.
// (Blend/shuffle combines with fewer multiplier-port instructions measured no faster on Zen 3.)
// Signed values (IQ4_NL): maddubs of |x| (0..128 as unsigned bytes, -128 included) and the value
// with x's sign (-127..127) gives exact pair sums (|.| <= 2 * 128 * 127 < 32767); madd with ones
// widens each half to int32 before lo and hi are added, and quad_sums adds the 8-element sums with
// hadd in int32 (|8-element sum| <= 8 * 127 * 128 does not fit int16): the same lane layout.
// Signed weights (Q8_0) take the same stages with the roles swapped: |q| (0..128) times x with q's
// sign (x in -127..127), pair sums <= 2 * 128 * 127.
template <typename Fmt>
__m256i pair_sums(const NibblePair& w, const ActivationPair& x) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (signed_weights<Fmt>()) {
    const __m256i lo = _mm256_maddubs_epi16(_mm256_abs_epi8(w.lo), _mm256_sign_epi8(x.lo, w.lo));
    const __m256i hi = _mm256_maddubs_epi16(_mm256_abs_epi8(w.hi), _mm256_sign_epi8(x.hi, w.hi));
    return _mm256_add_epi32(_mm256_madd_epi16(lo, ones), _mm256_madd_epi16(hi, ones));
  } else if constexpr (signed_values<Fmt>()) {
    const __m256i lo = _mm256_maddubs_epi16(_mm256_abs_epi8(x.lo), _mm256_sign_epi8(w.lo, x.lo));
    const __m256i hi = _mm256_maddubs_epi16(_mm256_abs_epi8(x.hi), _mm256_sign_epi8(w.hi, x.hi));
    return _mm256_add_epi32(_mm256_madd_epi16(lo, ones), _mm256_madd_epi16(hi, ones));
  } else {
    return _mm256_madd_epi16(
        _mm256_add_epi16(_mm256_maddubs_epi16(w.lo, x.lo), _mm256_maddubs_epi16(w.hi, x.hi)), ones);
  }
}

template <typename Fmt>
__m256i quad_sums(__m256i pair_i, __m256i pair_j) {
  if constexpr (signed_values<Fmt>() || signed_weights<Fmt>()) {
    return _mm256_hadd_epi32(pair_i, pair_j);
  } else {
    return _mm256_madd_epi16(_mm256_packs_epi32(pair_i, pair_j), _mm256_set1_epi16(1));
  }
}

__m256i row_sums(__m256i quad01, __m256i quad23) {
  return _mm256_hadd_epi32(quad01, quad23);
}

// Rows p[0..7] against kTokens activation rows (quants xq[t], scales xd[t], bias sums bias[t]);
// acc lane r of token t ends as y[t][r]; lanes [lane_begin, lane_end) are stored at out[t]. Row
// i's block b is at p[i] + b * block_stride (quant_dot_legacy_walk.h). With `prefetch` (the
// group's first token tile) the same bytes of the next row group, next_group bytes ahead, are
// prefetched into L2: plain rows are short (a few hundred bytes to a few KiB), so the hardware
// prefetchers alone leave DRAM streaming at ~60% of what this reaches. Prefetches past the matrix
// end are harmless (they never fault).
// With kAhead > 0 instead (the x8 interleave, whose group is one sequential run), `prefetch`
// fetches the lines kAhead bytes past each block into L1 (prefetch_ahead.h).
// Row pairs are (0, 4), (1, 5), (2, 6), (3, 7), which puts the final lanes in row order.
template <typename Fmt, int kTokens, size_t kAhead>
void rows8(const uint8_t* const p[kGroupRows], bool prefetch, size_t block_stride,
           size_t next_group, size_t blocks, const int8_t* const xq[kTokens],
           const float* const xd[kTokens], const int32_t* const bias[kTokens],
           float* const out[kTokens], size_t lane_begin, size_t lane_end) {
  __m256 acc[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) acc[t] = _mm256_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const size_t off = b * block_stride;
    if constexpr (kAhead > 0) {
      if (prefetch) prefetch_ahead(p[0] + off, kAhead, block_stride);
    } else if (prefetch && (b & 3) == 0) {
      // One line per row every 4 blocks (68 or 72 bytes; the hardware prefetcher fills the odd
      // line skipped).
      for (size_t i = 0; i < kGroupRows; ++i) {
        _mm_prefetch(reinterpret_cast<const char*>(p[i] + off + next_group), _MM_HINT_T1);
      }
    }
    __m256i q01[kTokens];
    {
      const NibblePair w04 = Fmt::unpack(p[0] + off, p[4] + off);
      const NibblePair w15 = Fmt::unpack(p[1] + off, p[5] + off);
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) {
        const ActivationPair x = load_activations(xq[t] + b * kLegacyBlock);
        q01[t] = quad_sums<Fmt>(pair_sums<Fmt>(w04, x), pair_sums<Fmt>(w15, x));
      }
    }
    __m256i sums[kTokens];
    {
      const NibblePair w26 = Fmt::unpack(p[2] + off, p[6] + off);
      const NibblePair w37 = Fmt::unpack(p[3] + off, p[7] + off);
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) {
        const ActivationPair x = load_activations(xq[t] + b * kLegacyBlock);
        sums[t] = row_sums(q01[t], quad_sums<Fmt>(pair_sums<Fmt>(w26, x), pair_sums<Fmt>(w37, x)));
      }
    }
    const __m256 ws = Fmt::scales(p, off);
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) {
      // No bias to take off for Q8_0 and IQ4_NL: two vector micro-ops per token and block less
      // (llvm-mca's Zen 3 model: 3-6 % fewer cycles per block for tiles of 2 to 8 tokens).
      __m256i isum = sums[t];
      if constexpr (Fmt::kBias != 0) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(bias[t][b]));
      const __m256 scale = _mm256_mul_ps(ws, _mm256_set1_ps(xd[t][b]));
      acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(_mm256_cvtepi32_ps(isum), scale));
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) avx2_store_lanes(out[t], acc[t], lane_begin, lane_end);
}

// The groups of quant_dot_legacy_walk.h. kPrefetch: whether a group's first token tile prefetches
// (plain rows: the next group, eight strided streams; the x8 interleave, one sequential run:
// kAhead bytes ahead, or nothing where kAhead is 0 and the hardware prefetchers alone stream it,
// see quant_dot_x8_walk.h).
template <bool kPrefetch, size_t kAhead>
struct Avx2Groups {
  static constexpr size_t kRows = kGroupRows;
  template <typename Fmt, int T>
  static void run(const uint8_t* const* p, bool first, size_t block_stride, size_t row_bytes,
                  size_t blocks, const int8_t* const* xq, const float* const* xd,
                  const int32_t* const* bias, float* const* out, size_t lane_begin,
                  size_t lane_end) {
    rows8<Fmt, T, kAhead>(p, kPrefetch && first, block_stride, kGroupRows * row_bytes, blocks, xq,
                          xd, bias, out, lane_begin, lane_end);
  }
};
using RowGroups = Avx2Groups<true, 0>;
// The x8 interleave 2 KiB ahead (prefetch_ahead.h: on a first-generation Zen EPYC a 256 MiB Q8_0
// matrix streamed at 10.7-10.8 GB/s per thread against 6.8-7.1 without), and without software
// prefetches for the AVX-512 VNNI kernel's one-token calls (on a Zen 4 the hardware prefetchers
// alone stream it at the memory rate, 25-26 GB/s per thread).
using X8Groups = Avx2Groups<true, 2048>;
using X8GroupsUnprefetched = Avx2Groups<false, 0>;

}  // namespace

void dot_q8_0_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride) {
  legacy_dot_rows<Q8_0, RowGroups>(w, row_bytes, rows, x, y, y_stride);
}

void dot_q4_0_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride) {
  legacy_dot_rows<Q4_0, RowGroups>(w, row_bytes, rows, x, y, y_stride);
}

void dot_q5_0_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride) {
  legacy_dot_rows<Q5_0, RowGroups>(w, row_bytes, rows, x, y, y_stride);
}

void dot_mxfp4_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                    float* y, size_t y_stride) {
  legacy_dot_rows<Mxfp4, RowGroups>(w, row_bytes, rows, x, y, y_stride);
}

void dot_iq4_nl_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride) {
  legacy_dot_rows<Iq4Nl, RowGroups>(w, row_bytes, rows, x, y, y_stride);
}

void dot_q8_0_x8_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                      const ActivationRows& x, float* y, size_t y_stride) {
  legacy_dot_x8<Q8_0, X8Groups>(groups, row_begin, row_end, x, y, y_stride);
}

void dot_q8_0_x8_unprefetched_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                                   const ActivationRows& x, float* y, size_t y_stride) {
  legacy_dot_x8<Q8_0, X8GroupsUnprefetched>(groups, row_begin, row_end, x, y, y_stride);
}

void dot_q4_0_x8_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                      const ActivationRows& x, float* y, size_t y_stride) {
  legacy_dot_x8<Q4_0, X8Groups>(groups, row_begin, row_end, x, y, y_stride);
}

void dot_q5_0_x8_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                      const ActivationRows& x, float* y, size_t y_stride) {
  legacy_dot_x8<Q5_0, X8Groups>(groups, row_begin, row_end, x, y, y_stride);
}

void dot_iq4_nl_x8_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                        const ActivationRows& x, float* y, size_t y_stride) {
  legacy_dot_x8<Iq4Nl, X8Groups>(groups, row_begin, row_end, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
