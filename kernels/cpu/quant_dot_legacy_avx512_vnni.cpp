// AVX-512 VNNI (+F/BW/VL) dot products of Q8_0, Q4_0, Q5_0, MXFP4 and IQ4_NL weights with Q8_0
// activations, bit-identical to the scalar references in quant_dot_legacy_scalar.cpp.
//
// Built with the AVX-512 flags plus -mavx512vnni (-ffp-contract=off) and linked into binaries that
// run on any x86-64: everything except the exported dot_*_avx512_vnni functions is in the anonymous
// namespace and nothing inline or templated is shared with other files, so the linker can never
// pick an AVX-512 copy for a caller on another CPU.
//
// Technique: sixteen weight rows at once, one int32 / float lane per row. Four 512-bit loads put
// the 16 rows' 16 quant bytes of a block in 128-bit lanes (register g, lane l: row g + 4l); a 4 x 4
// dword transpose within the lanes then leaves register d with row r's quant bytes 4d .. 4d+3 in
// dword r (Q8_0: two such loads and transposes, elements 0..15 and 16..31, each quant made the
// unsigned byte u = q + 128 by flipping its top bit, bias 128). Split into nibbles they are
// unsigned bytes u = q + kBias (Q4_0: the nibble, bias 8;
// Q5_0: the nibble plus 16 where its qh bit is set, added with the qh bits as a byte k-mask before
// the transpose, bias 16; MXFP4: the doubled E2M1 value plus 12 by vpshufb, bias 12; IQ4_NL:
// the non-linear value plus 128 by vpshufb, bias 128). Eight
// vpdpbusd with the activation block's dwords broadcast then sum each row's block in its own
// int32 lane: no horizontal reduction, so a token costs 8 vpdpbusd and 5 more instructions per
// 16 rows, and the unpack and transpose are shared by up to 8 tokens (register blocking).
// Subtracting kBias * sum(x) (precomputed per activation block) gives each row's exact isum.
// Then, lane-wise and in block order, scale = ws * dx, term = float(isum) * scale and
// acc = acc + term as separate instructions: the scalar reference's float operations per row.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/quant_dot_legacy_walk.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kTileRows = 16;
// Activation blocks whose bias sums fit on the stack (16 KiB); larger inputs use the heap.

uint64_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

uint32_t load_u32(const int8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Row g + 4l of the tile (l = 0..3) at `off` of its row: its 16 bytes in 128-bit lane l.
__m512i load_lanes(const uint8_t* const p[kTileRows], int g, size_t off) {
  __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p[g] + off)));
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[g + 4] + off)), 1);
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[g + 8] + off)), 2);
  return _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[g + 12] + off)),
                            3);
}

// The 4 x 4 dword transpose within each 128-bit lane: v[d] dword g of lane l = a[g] dword d of
// lane l. With a[g] lane l holding row g + 4l, v[d]'s dword 4l + g is row 4l + g's dword d: the 16
// rows in order, one per dword.
void transpose_lanes(const __m512i a[4], __m512i v[4]) {
  const __m512i t0 = _mm512_unpacklo_epi32(a[0], a[1]);
  const __m512i t1 = _mm512_unpackhi_epi32(a[0], a[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(a[2], a[3]);
  const __m512i t3 = _mm512_unpackhi_epi32(a[2], a[3]);
  v[0] = _mm512_unpacklo_epi64(t0, t2);
  v[1] = _mm512_unpackhi_epi64(t0, t2);
  v[2] = _mm512_unpacklo_epi64(t1, t3);
  v[3] = _mm512_unpackhi_epi64(t1, t3);
}

// A block of the tile's 16 rows as unsigned bytes u = q + kBias, one row per dword: dword r of
// lo[d] holds row r's elements 4d .. 4d+3, of hi[d] its elements 16 + 4d .. 16 + 4d+3.
struct TileBlock {
  __m512i lo[4];
  __m512i hi[4];
};

// The tile's 16 rows' quant bytes at `off` (16 per row, laid out as Q4_0's) as nibbles in the
// TileBlock order, 0..15.
TileBlock load_nibbles(const uint8_t* const p[kTileRows], size_t off) {
  __m512i a[4], v[4];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) a[g] = load_lanes(p, g, off);
  transpose_lanes(a, v);
  const __m512i mask = _mm512_set1_epi8(0x0f);
  TileBlock t;
#pragma GCC unroll 4
  for (int d = 0; d < 4; ++d) {
    t.lo[d] = _mm512_and_si512(v[d], mask);
    t.hi[d] = _mm512_and_si512(_mm512_srli_epi16(v[d], 4), mask);
  }
  return t;
}

// As load_nibbles, each nibble then replaced by its entry of `table` (16 bytes in every 128-bit
// lane): MXFP4's and IQ4_NL's biased values.
TileBlock load_table_values(const uint8_t* const p[kTileRows], size_t off, __m512i table) {
  TileBlock t = load_nibbles(p, off);
#pragma GCC unroll 4
  for (int d = 0; d < 4; ++d) {
    t.lo[d] = _mm512_shuffle_epi8(table, t.lo[d]);
    t.hi[d] = _mm512_shuffle_epi8(table, t.hi[d]);
  }
  return t;
}

// The tile's 16 fp16 scales at `off` of each row, in row order, converted exactly (vcvtph2ps).
// The halves are packed with scalar loads and shifts, off the vector ports.
__m512 fp16_scales(const uint8_t* const p[kTileRows], size_t off) {
  uint64_t q[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    q[i] = load_u16(p[4 * i] + off) | load_u16(p[4 * i + 1] + off) << 16 |
           load_u16(p[4 * i + 2] + off) << 32 | load_u16(p[4 * i + 3] + off) << 48;
  }
  return _mm512_cvtph_ps(
      _mm256_setr_epi64x(static_cast<long long>(q[0]), static_cast<long long>(q[1]),
                         static_cast<long long>(q[2]), static_cast<long long>(q[3])));
}

// Q4_0: block = f16 d, 16 nibble bytes; u = q (0..15) = (q - 8) + 8; scale order dw * dx.
struct Q4_0 {
  static constexpr size_t kBytes = 18;
  static constexpr int32_t kBias = 8;

  static TileBlock unpack(const uint8_t* const p[kTileRows], size_t off) {
    return load_nibbles(p, off + 2);
  }

  static __m512 scales(const uint8_t* const p[kTileRows], size_t off) {
    return fp16_scales(p, off);
  }
};

// Q8_0: block = f16 d, 32 int8 quants; u = q + 128 (0..255: the top bit flipped); scale order
// dw * dx as Q4_0.
struct Q8_0 {
  static constexpr size_t kBytes = 34;
  static constexpr int32_t kBias = 128;

  static TileBlock unpack(const uint8_t* const p[kTileRows], size_t off) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512i a[4];
    TileBlock t;
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) a[g] = _mm512_xor_si512(load_lanes(p, g, off + 2), flip);
    transpose_lanes(a, t.lo);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) a[g] = _mm512_xor_si512(load_lanes(p, g, off + 18), flip);
    transpose_lanes(a, t.hi);
    return t;
  }

  static __m512 scales(const uint8_t* const p[kTileRows], size_t off) {
    return fp16_scales(p, off);
  }
};

// Q5_0: block = f16 d, 4 bytes qh, 16 nibble bytes; u = nibble + 16 * (bit j of qh) (0..31) =
// q + 16; scale order dw * dx as Q4_0. Before the transpose, register g's lane l holds row g + 4l's
// elements 0..15 (low nibbles) or 16..31 (high nibbles) in byte order, so the high bits of such a
// register are the four rows' 16-bit qh halves side by side: one k-mask, one masked byte add.
struct Q5_0 {
  static constexpr size_t kBytes = 22;
  static constexpr int32_t kBias = 16;

  static TileBlock unpack(const uint8_t* const p[kTileRows], size_t off) {
    const __m512i mask = _mm512_set1_epi8(0x0f);
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    __m512i lo[4], hi[4];
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const __m512i v = load_lanes(p, g, off + 6);
      const uint8_t* a = p[g] + off;
      const uint8_t* b = p[g + 4] + off;
      const uint8_t* c = p[g + 8] + off;
      const uint8_t* d = p[g + 12] + off;
      const __mmask64 lo_bits =
          load_u16(a + 2) | load_u16(b + 2) << 16 | load_u16(c + 2) << 32 | load_u16(d + 2) << 48;
      const __mmask64 hi_bits =
          load_u16(a + 4) | load_u16(b + 4) << 16 | load_u16(c + 4) << 32 | load_u16(d + 4) << 48;
      const __m512i l = _mm512_and_si512(v, mask);
      const __m512i h = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
      lo[g] = _mm512_mask_add_epi8(l, lo_bits, l, bit4);
      hi[g] = _mm512_mask_add_epi8(h, hi_bits, h, bit4);
    }
    TileBlock t;
    transpose_lanes(lo, t.lo);
    transpose_lanes(hi, t.hi);
    return t;
  }

  static __m512 scales(const uint8_t* const p[kTileRows], size_t off) {
    return fp16_scales(p, off);
  }
};

// MXFP4: block = uint8 e, 16 nibble bytes; u = kMxfp4Values[q] + 12 (0..24) by table lookup; the
// weight scale is de = 2^(e - 128) (the scalar reference's dx * de equals de * dx: IEEE
// multiplication is commutative).
struct Mxfp4 {
  static constexpr size_t kBytes = 17;
  static constexpr int32_t kBias = 12;

  static TileBlock unpack(const uint8_t* const p[kTileRows], size_t off) {
    // The doubled E2M1 values plus 12, indexed by the 4-bit code, in every 128-bit lane.
    const __m512i biased_values = _mm512_broadcast_i32x4(
        _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    return load_table_values(p, off + 1, biased_values);
  }

  // The 16 rows' de: e >= 2 is the normal float with biased exponent e - 1; e = 0 and 1 are the
  // subnormals 2^-128 and 2^-127 (0x00200000 << e); e = 255 gives 2^127, as the scalar code.
  static __m512 scales(const uint8_t* const p[kTileRows], size_t off) {
    uint64_t q[2];
    for (int i = 0; i < 2; ++i) {
      const uint8_t* const* r = p + 8 * i;
      q[i] = static_cast<uint64_t>(r[0][off]) | static_cast<uint64_t>(r[1][off]) << 8 |
             static_cast<uint64_t>(r[2][off]) << 16 | static_cast<uint64_t>(r[3][off]) << 24 |
             static_cast<uint64_t>(r[4][off]) << 32 | static_cast<uint64_t>(r[5][off]) << 40 |
             static_cast<uint64_t>(r[6][off]) << 48 | static_cast<uint64_t>(r[7][off]) << 56;
    }
    const __m512i e = _mm512_cvtepu8_epi32(
        _mm_set_epi64x(static_cast<long long>(q[1]), static_cast<long long>(q[0])));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    const __mmask16 is_normal = _mm512_cmpgt_epi32_mask(e, _mm512_set1_epi32(1));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(is_normal, subnormal, normal));
  }
};

// IQ4_NL: block = f16 d, 16 nibble bytes; u = kIq4Values[q] + 128 (1..241) by table lookup;
// scale order dw * dx as Q4_0.
struct Iq4Nl {
  static constexpr size_t kBytes = 18;
  static constexpr int32_t kBias = 128;

  static TileBlock unpack(const uint8_t* const p[kTileRows], size_t off) {
    // The values plus 128, indexed by the 4-bit code, in every 128-bit lane (as unsigned bytes).
    const __m512i biased_values = _mm512_broadcast_i32x4(_mm_setr_epi8(
        1, 24, 45, 63, 79, 93, 106, 118, static_cast<char>(129), static_cast<char>(141),
        static_cast<char>(153), static_cast<char>(166), static_cast<char>(181),
        static_cast<char>(197), static_cast<char>(217), static_cast<char>(241)));
    return load_table_values(p, off + 2, biased_values);
  }

  static __m512 scales(const uint8_t* const p[kTileRows], size_t off) {
    return fp16_scales(p, off);
  }
};

// The 16 rows' exact block sums sum u * x with one token's block x (dword r: row r): eight
// vpdpbusd against the activation dwords broadcast, in two chains (elements 0..15, 16..31). Each
// int32 lane adds at most 16 products of u <= 255 and |x| <= 128: no overflow, and vpdpbusd does
// not saturate.
__m512i block_sums(const TileBlock& w, const int8_t* x) {
  __m512i lo = _mm512_setzero_si512();
  __m512i hi = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int d = 0; d < 4; ++d) {
    lo = _mm512_dpbusd_epi32(lo, w.lo[d], _mm512_set1_epi32(static_cast<int>(load_u32(x + 4 * d))));
    hi = _mm512_dpbusd_epi32(hi, w.hi[d],
                             _mm512_set1_epi32(static_cast<int>(load_u32(x + 16 + 4 * d))));
  }
  return _mm512_add_epi32(lo, hi);
}

// Rows p[0..15] against kTokens activation rows (quants xq[t], scales xd[t], bias sums bias[t]);
// lane r of acc[t] ends as y[t][r]; lanes [lane_begin, lane_end) are stored at out[t]. Row i's
// block b is at p[i] + b * block_stride (quant_dot_legacy_walk.h). With `prefetch` (the group's
// first token tile) the same bytes of the group after next, `ahead` bytes on, are prefetched into
// L2, one line per row every 64 / kBytes blocks; prefetches past the matrix end never fault. (One
// token, 256 MiB Q5_0 stream on the loaded Zen 4: no prefetch ~5 GB/s, the next group ~7.6, the
// group after next ~9.7, four groups on ~9.6.)
template <typename Fmt, int kTokens>
void rows16(const uint8_t* const p[kTileRows], bool prefetch, size_t block_stride, size_t ahead,
            size_t blocks, const int8_t* const xq[kTokens], const float* const xd[kTokens],
            const int32_t* const bias[kTokens], float* const out[kTokens], size_t lane_begin,
            size_t lane_end) {
  constexpr size_t kPrefetchEvery = 64 / Fmt::kBytes;
  __m512 acc[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) acc[t] = _mm512_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const size_t off = b * block_stride;
    if (prefetch && b % kPrefetchEvery == 0) {
      for (size_t i = 0; i < kTileRows; ++i) {
        // Formed as an integer: the address may lie past the end of the weights.
        const uintptr_t a = reinterpret_cast<uintptr_t>(p[i]) + off + ahead;
        _mm_prefetch(reinterpret_cast<const char*>(a), _MM_HINT_T1);
      }
    }
    const TileBlock wb = Fmt::unpack(p, off);
    const __m512 ws = Fmt::scales(p, off);
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) {
      const __m512i sums = block_sums(wb, xq[t] + b * kLegacyBlock);
      const __m512i isum = _mm512_sub_epi32(sums, _mm512_set1_epi32(bias[t][b]));
      const __m512 scale = _mm512_mul_ps(ws, _mm512_set1_ps(xd[t][b]));
      acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_cvtepi32_ps(isum), scale));
    }
  }
  // Lanes [lane_begin, lane_end), moved down to lane 0 first where they do not start there.
  const __mmask16 lanes =
      static_cast<__mmask16>(((1u << lane_end) - 1) & ~((1u << lane_begin) - 1));
  const __mmask16 store = static_cast<__mmask16>((1u << (lane_end - lane_begin)) - 1);
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) {
    const __m512 v = lane_begin == 0 ? acc[t] : _mm512_maskz_compress_ps(lanes, acc[t]);
    _mm512_mask_storeu_ps(out[t], store, v);
  }
}

// The groups of quant_dot_legacy_walk.h, for plain rows and the x8 interleave alike: a group's
// first token tile prefetches the group after next (on the interleave too: its 16-row tiles read
// two sequential runs, which streamed a 256 MiB Q8_0 matrix at 14.8 GB/s with one token without the
// prefetches and at 18.9 with them).
struct VnniGroups {
  static constexpr size_t kRows = kTileRows;
  template <typename Fmt, int T>
  static void run(const uint8_t* const* p, bool first, size_t block_stride, size_t row_bytes,
                  size_t blocks, const int8_t* const* xq, const float* const* xd,
                  const int32_t* const* bias, float* const* out, size_t lane_begin,
                  size_t lane_end) {
    rows16<Fmt, T>(p, first, block_stride, 2 * kTileRows * row_bytes, blocks, xq, xd, bias, out,
                   lane_begin, lane_end);
  }
};

}  // namespace

void dot_q8_0_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride) {
  legacy_dot_rows<Q8_0, VnniGroups>(w, row_bytes, rows, x, y, y_stride);
}

void dot_q4_0_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride) {
  legacy_dot_rows<Q4_0, VnniGroups>(w, row_bytes, rows, x, y, y_stride);
}

void dot_q5_0_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride) {
  legacy_dot_rows<Q5_0, VnniGroups>(w, row_bytes, rows, x, y, y_stride);
}

void dot_mxfp4_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                           float* y, size_t y_stride) {
  // One token streams faster through the AVX2 kernel's 8-row groups (measured: the 16-row tile
  // reached 0.85-0.95x of it on the 256 MiB stream), so it takes that one; both are bit-identical
  // to the scalar reference, so the choice never changes a result.
  if (x.n_tokens == 1) {
    dot_mxfp4_avx2(w, row_bytes, rows, x, y, y_stride);
    return;
  }
  legacy_dot_rows<Mxfp4, VnniGroups>(w, row_bytes, rows, x, y, y_stride);
}

void dot_iq4_nl_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows,
                            const ActivationRows& x, float* y, size_t y_stride) {
  legacy_dot_rows<Iq4Nl, VnniGroups>(w, row_bytes, rows, x, y, y_stride);
}

void dot_q8_0_x8_avx512_vnni(const uint8_t* groups, size_t row_begin, size_t row_end,
                             const ActivationRows& x, float* y, size_t y_stride) {
  // One token streams faster through the AVX2 kernel's single sequential run per group (256 MiB:
  // 25-26 GB/s against 18.9 on a Zen 4 thread); both are bit-identical to the scalar
  // reference, so the choice never changes a result.
  if (x.n_tokens == 1) {
    dot_q8_0_x8_unprefetched_avx2(groups, row_begin, row_end, x, y, y_stride);
    return;
  }
  legacy_dot_x8<Q8_0, VnniGroups>(groups, row_begin, row_end, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
