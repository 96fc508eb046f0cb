// AVX-512 VNNI (+F/BW/VL) dot products of Q5_0, Q4_0 and MXFP4 weights with Q8_0 activations,
// bit-identical to the scalar references in quant_dot_legacy_scalar.cpp.
//
// Built with the AVX-512 flags plus -mavx512vnni (-ffp-contract=off) and linked into binaries that
// run on any x86-64: everything except the exported dot_*_avx512_vnni functions is in the anonymous
// namespace and nothing inline or templated is shared with other files, so the linker can never
// pick an AVX-512 copy for a caller on another CPU.
//
// Technique: sixteen weight rows at once, one float lane per row. A 512-bit register holds four
// rows' 16 quant bytes, one row per 128-bit lane; split into low and high nibbles it is elements
// 0..15 and 16..31 of those four rows as unsigned bytes u = q + kBias (Q4_0: the nibble, bias 8;
// Q5_0: the nibble with its fifth bit added from the qh bits as a byte mask, bias 16; MXFP4: the
// doubled E2M1 value plus 12 by vpshufb, bias 12). Two vpdpbusd against the activation block's
// halves (broadcast to every lane; signed bytes, no saturation) leave 4 int32 partial sums per
// row; four such registers reduce to the sixteen rows' block sums with 6 unpack/add steps, and
// subtracting kBias * sum(x) (precomputed per activation block) gives each row's exact isum.
// Then, lane-wise and in block order, scale = ws * dx, term = float(isum) * scale and
// acc = acc + term as separate instructions: the scalar reference's float operations per row.
// Several tokens share each unpacked weight block (register blocking over tokens).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kBlock = 32;
constexpr size_t kTileRows = 16;
// Activation blocks whose bias sums fit on the stack (16 KiB); larger inputs use the heap.
constexpr size_t kStackBiasSums = 4096;

uint64_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
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

// Four rows' nibbles: lo holds the low nibbles (elements 0..15 of each lane's row), hi the high
// nibbles (elements 16..31), as unsigned bytes 0..15.
struct Nibbles {
  __m512i lo;
  __m512i hi;
};

Nibbles split_nibbles(__m512i v) {
  const __m512i mask = _mm512_set1_epi8(0x0f);
  return {_mm512_and_si512(v, mask), _mm512_and_si512(_mm512_srli_epi16(v, 4), mask)};
}

// The tile's 16 fp16 scales at `off` of each row, in row order, converted exactly (vcvtph2ps).
// The halves are packed with scalar loads and shifts, off the vector ports.
__m512 fp16_scales(const uint8_t* const p[kTileRows], size_t off) {
  uint64_t q[4];
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

  static Nibbles unpack(const uint8_t* const p[kTileRows], int g, size_t off) {
    return split_nibbles(load_lanes(p, g, off + 2));
  }

  static __m512 scales(const uint8_t* const p[kTileRows], size_t off) {
    return fp16_scales(p, off);
  }
};

// Q5_0: block = f16 d, 4 bytes qh, 16 nibble bytes; u = nibble + 16 * (bit j of qh) (0..31) =
// q + 16; scale order dw * dx as Q4_0. Bit j of a row's qh belongs to its element j, i.e. byte j of
// lo (j < 16) or byte j - 16 of hi in that row's lane, so each register's 64 high bits are the four
// rows' 16-bit qh halves side by side: one k-mask, one masked byte add.
struct Q5_0 {
  static constexpr size_t kBytes = 22;
  static constexpr int32_t kBias = 16;

  static Nibbles unpack(const uint8_t* const p[kTileRows], int g, size_t off) {
    const Nibbles q = split_nibbles(load_lanes(p, g, off + 6));
    const uint8_t* a = p[g] + off;
    const uint8_t* b = p[g + 4] + off;
    const uint8_t* c = p[g + 8] + off;
    const uint8_t* d = p[g + 12] + off;
    const __mmask64 lo_bits =
        load_u16(a + 2) | load_u16(b + 2) << 16 | load_u16(c + 2) << 32 | load_u16(d + 2) << 48;
    const __mmask64 hi_bits =
        load_u16(a + 4) | load_u16(b + 4) << 16 | load_u16(c + 4) << 32 | load_u16(d + 4) << 48;
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    return {_mm512_mask_add_epi8(q.lo, lo_bits, q.lo, bit4),
            _mm512_mask_add_epi8(q.hi, hi_bits, q.hi, bit4)};
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

  static Nibbles unpack(const uint8_t* const p[kTileRows], int g, size_t off) {
    // The doubled E2M1 values plus 12, indexed by the 4-bit code, in every 128-bit lane.
    const __m512i biased_values = _mm512_broadcast_i32x4(
        _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    const Nibbles q = split_nibbles(load_lanes(p, g, off + 1));
    return {_mm512_shuffle_epi8(biased_values, q.lo), _mm512_shuffle_epi8(biased_values, q.hi)};
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

// Row group g's partial sums with one token: lane l holds 4 int32 sums of row g + 4l (exact:
// vpdpbusd adds 4 products of u <= 31 and |x| <= 128 to each int32 lane without saturation).
__m512i partial_sums(const Nibbles& w, __m512i x_lo, __m512i x_hi) {
  return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w.lo, x_lo), w.hi, x_hi);
}

// The four groups' partials (group g lane l = row g + 4l) to the 16 rows' block sums in row order:
// unpack/add pairs dword lanes 0+2, 1+3 of groups (0, 1) and (2, 3), then the 64-bit unpack/add
// leaves lane l = [row 4l, 4l + 1, 4l + 2, 4l + 3]. Integer adds wrap, and every true sum fits.
__m512i row_sums(__m512i p0, __m512i p1, __m512i p2, __m512i p3) {
  const __m512i e = _mm512_add_epi32(_mm512_unpacklo_epi32(p0, p1), _mm512_unpackhi_epi32(p0, p1));
  const __m512i f = _mm512_add_epi32(_mm512_unpacklo_epi32(p2, p3), _mm512_unpackhi_epi32(p2, p3));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(e, f), _mm512_unpackhi_epi64(e, f));
}

// Rows p[0..15] against kTokens activation rows (quants xq[t], scales xd[t], bias sums bias[t]);
// lane r of acc[t] ends as y[t][r], `valid` of them stored at out[t]. With `prefetch` (the
// group's first token tile) the same bytes of the next row group, next_group bytes ahead, are
// prefetched into L2, one line per row every 64 / kBytes blocks (the hardware prefetcher fills a
// line skipped); prefetches past the matrix end never fault.
template <typename Fmt, int kTokens>
void rows16(const uint8_t* const p[kTileRows], bool prefetch, size_t next_group, size_t blocks,
            const int8_t* const xq[kTokens], const float* const xd[kTokens],
            const int32_t* const bias[kTokens], float* const out[kTokens], size_t valid) {
  constexpr size_t kPrefetchEvery = 64 / Fmt::kBytes;
  __m512 acc[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) acc[t] = _mm512_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const size_t off = b * Fmt::kBytes;
    if (prefetch && b % kPrefetchEvery == 0) {
      for (size_t i = 0; i < kTileRows; ++i) {
        _mm_prefetch(reinterpret_cast<const char*>(p[i] + off + next_group), _MM_HINT_T1);
      }
    }
    const Nibbles w0 = Fmt::unpack(p, 0, off);
    const Nibbles w1 = Fmt::unpack(p, 1, off);
    const Nibbles w2 = Fmt::unpack(p, 2, off);
    const Nibbles w3 = Fmt::unpack(p, 3, off);
    const __m512 ws = Fmt::scales(p, off);
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) {
      const int8_t* x = xq[t] + b * kBlock;
      const __m512i x_lo =
          _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
      const __m512i x_hi =
          _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 16)));
      const __m512i sums = row_sums(partial_sums(w0, x_lo, x_hi), partial_sums(w1, x_lo, x_hi),
                                    partial_sums(w2, x_lo, x_hi), partial_sums(w3, x_lo, x_hi));
      const __m512i isum = _mm512_sub_epi32(sums, _mm512_set1_epi32(bias[t][b]));
      const __m512 scale = _mm512_mul_ps(ws, _mm512_set1_ps(xd[t][b]));
      acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_cvtepi32_ps(isum), scale));
    }
  }
  const __mmask16 store = static_cast<__mmask16>((1u << valid) - 1);
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) _mm512_mask_storeu_ps(out[t], store, acc[t]);
}

// One group of 16 rows against tokens [t0, t0 + kTokens).
template <typename Fmt, int kTokens>
void rows16_tokens(const uint8_t* const p[kTileRows], size_t row_bytes, size_t r, size_t valid,
                   const ActivationRows& x, const int32_t* bias_sums, size_t t0, float* y,
                   size_t y_stride) {
  const size_t blocks = x.cols / kBlock;
  const int8_t* xq[kTokens];
  const float* xd[kTokens];
  const int32_t* bias[kTokens];
  float* out[kTokens];
  for (int i = 0; i < kTokens; ++i) {
    const size_t t = t0 + static_cast<size_t>(i);
    xq[i] = x.qs + t * x.cols;
    xd[i] = x.d + t * blocks;
    bias[i] = bias_sums + t * blocks;
    out[i] = y + t * y_stride + r;
  }
  rows16<Fmt, kTokens>(p, t0 == 0, kTileRows * row_bytes, blocks, xq, xd, bias, out, valid);
}

template <typename Fmt>
void dot_rows(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x, float* y,
              size_t y_stride) {
  const size_t blocks = x.cols / kBlock;
  const size_t n = x.n_tokens;
  if (rows == 0 || n == 0) return;
  // kBias * (sum of the block's activation quants), per token and block: exact in int32
  // (|sum| <= 32 * 128).
  int32_t stack_sums[kStackBiasSums];
  int32_t* bias_sums = n * blocks <= kStackBiasSums ? stack_sums : new int32_t[n * blocks];
  for (size_t i = 0; i < n * blocks; ++i) {
    const int8_t* q = x.qs + i * kBlock;
    int32_t s = 0;
    for (size_t j = 0; j < kBlock; ++j) s += q[j];
    bias_sums[i] = Fmt::kBias * s;
  }
  for (size_t r = 0; r < rows; r += kTileRows) {
    // Past the last row, the group repeats it (those lanes are computed and not stored).
    const uint8_t* p[kTileRows];
    for (size_t i = 0; i < kTileRows; ++i) {
      p[i] = w + (r + i < rows ? r + i : rows - 1) * row_bytes;
    }
    const size_t valid = rows - r < kTileRows ? rows - r : kTileRows;
    // Token tiles of 8, 4, 2, 1 (wider tiles unpack each weight block for more tokens); only the
    // first tile streams the group from memory, so only it prefetches the next group.
    size_t t = 0;
    for (; t + 8 <= n; t += 8) {
      rows16_tokens<Fmt, 8>(p, row_bytes, r, valid, x, bias_sums, t, y, y_stride);
    }
    for (; t + 4 <= n; t += 4) {
      rows16_tokens<Fmt, 4>(p, row_bytes, r, valid, x, bias_sums, t, y, y_stride);
    }
    for (; t + 2 <= n; t += 2) {
      rows16_tokens<Fmt, 2>(p, row_bytes, r, valid, x, bias_sums, t, y, y_stride);
    }
    for (; t < n; ++t) {
      rows16_tokens<Fmt, 1>(p, row_bytes, r, valid, x, bias_sums, t, y, y_stride);
    }
  }
  if (bias_sums != stack_sums) delete[] bias_sums;
}

}  // namespace

void dot_q4_0_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride) {
  dot_rows<Q4_0>(w, row_bytes, rows, x, y, y_stride);
}

void dot_q5_0_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride) {
  dot_rows<Q5_0>(w, row_bytes, rows, x, y, y_stride);
}

void dot_mxfp4_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                           float* y, size_t y_stride) {
  dot_rows<Mxfp4>(w, row_bytes, rows, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
