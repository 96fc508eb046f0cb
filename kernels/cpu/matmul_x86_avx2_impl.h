// AVX2 + FMA + F16C bodies of the matmul primitives (MatmulKernels), in an anonymous namespace:
// included only by the ISA files compiled with at least those -m flags (matmul_avx2.cpp and the
// AVX-512 files), each of which gets its own private copy.
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "matmul_x86_avx2_impl.h needs -mavx2 -mfma -mf16c"
#endif

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/avx2_sum_lanes.h"
#include "kernels/cpu/matmul_kernels.h"

// Register blocking of the float dot (rows x tokens); an includer may choose other values.
#ifndef AVX2_DOT_R
#define AVX2_DOT_R 4
#define AVX2_DOT_T 1
#endif

namespace tandem::kernels::detail {
namespace {

// ---- float dot products -------------------------------------------------------------------

// Lane mask for _mm256_maskload_ps: the first k (0..8) lanes on.
__m256i avx2_first_lanes(size_t k) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(k)), idx);
}

// Weight loaders: 8 consecutive weights of one row (row start `row`, column i, a multiple of 8)
// converted to float exactly as the *_to_float conversions below convert them; the tail form
// loads the k < 8 weights left and gives 0 in the other lanes.
struct Avx2F32 {
  static __m256 load(const uint8_t* row, size_t i) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  }
  static __m256 load_tail(const uint8_t* row, size_t i, size_t k) {
    return _mm256_maskload_ps(reinterpret_cast<const float*>(row) + i, avx2_first_lanes(k));
  }
};

// The first k (< 8) halves at p, zero-extended to 8.
__m128i avx2_load_halves(const uint8_t* p, size_t k) {
  uint16_t h[8] = {};
  std::memcpy(h, p, 2 * k);
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(h));
}

struct Avx2F16 {
  static __m256 load(const uint8_t* row, size_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  }
  static __m256 load_tail(const uint8_t* row, size_t i, size_t k) {
    return _mm256_cvtph_ps(avx2_load_halves(row + 2 * i, k));
  }
};

struct Avx2Bf16 {
  static __m256 widen(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static __m256 load(const uint8_t* row, size_t i) {
    return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  }
  static __m256 load_tail(const uint8_t* row, size_t i, size_t k) {
    return widen(avx2_load_halves(row + 2 * i, k));
  }
};

struct Avx2Q8_0 {
  static __m256 load(const uint8_t* row, size_t i) {
    const uint8_t* block = row + (i / 32) * 34;
    uint16_t dh;
    std::memcpy(&dh, block, 2);
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + i % 32));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)),
                         _mm256_set1_ps(_cvtsh_ss(dh)));
  }
  static __m256 load_tail(const uint8_t*, size_t, size_t) {
    return _mm256_setzero_ps();  // unused: Q8_0 rows are whole 32-blocks
  }
};

// FP8 E4M3 codes, sign-extended to 16 bits, as the fp16 bit patterns of their values times 2^-8:
// shifted left by 7 the sign copies fill bits 14..15 and exponent and mantissa land in bits 7..13,
// so clearing bit 14 leaves the sign at bit 15 and the E4M3 exponent e (bias 7) as the fp16
// exponent e (bias 15); a subnormal code (e = 0) becomes the fp16 subnormal of the same mantissa,
// which F16C converts exactly and without the microcode assist a float32 subnormal operand of a
// multiply costs on Intel cores. Exact for every code but the NaN codes, which kF8_E4M3_B128 never
// holds.
__m128i avx2_fp8_as_halves(__m128i sign_extended) {
  return _mm_and_si128(_mm_slli_epi16(sign_extended, 7),
                       _mm_set1_epi16(static_cast<short>(0xBFFF)));
}

// kF8_E4M3_B128: 132-byte blocks (float32 scale, 128 codes). The converted codes are 2^-8 times
// their values, so they are multiplied by the scale times 2^8: both factors are exact (the
// conversion refuses scales of 2^7 or more), and their product rounds once, as the scalar code *
// scale does.
struct Avx2F8B128 {
  static __m256 scale(const uint8_t* block) {
    float s;
    std::memcpy(&s, block, 4);
    return _mm256_set1_ps(s * 0x1p8f);
  }
  static __m256 convert(const uint8_t* codes, __m256 scale) {
    const __m128i c = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes)));
    return _mm256_mul_ps(_mm256_cvtph_ps(avx2_fp8_as_halves(c)), scale);
  }
  static __m256 load(const uint8_t* row, size_t i) {
    const uint8_t* block = row + (i / 128) * 132;
    return convert(block + 4 + i % 128, scale(block));
  }
  static __m256 load_tail(const uint8_t*, size_t, size_t) {
    return _mm256_setzero_ps();  // unused: rows are whole 128-blocks
  }
};

// R rows x T tokens at once, sharing the loads of x and w; rows are row_bytes apart. Per
// (row, token): two 8-lane FMA chains over 16-float steps, one more 8-float step into the first, a
// masked tail into the second, then (a0 + a1) reduced. The operations applied to one element
// depend neither on R and T nor on the weight loader (the loaders produce the same floats), so
// every blocking, and float tiles versus rows read in place, agree bit for bit.
template <int R, int T, class W>
void avx2_dot(const float* x, const uint8_t* w, size_t row_bytes, size_t cols, float* y,
              size_t y_stride) {
  __m256 a0[T][R], a1[T][R];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) a0[t][r] = a1[t][r] = _mm256_setzero_ps();
  }
  size_t i = 0;
  for (; i + 16 <= cols; i += 16) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m256 w0 = W::load(w + r * row_bytes, i);
      const __m256 w1 = W::load(w + r * row_bytes, i + 8);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        a0[t][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + t * cols + i), w0, a0[t][r]);
        a1[t][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + t * cols + i + 8), w1, a1[t][r]);
      }
    }
  }
  if (i + 8 <= cols) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m256 w0 = W::load(w + r * row_bytes, i);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        a0[t][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + t * cols + i), w0, a0[t][r]);
      }
    }
    i += 8;
  }
  if (i < cols) {
    const __m256i m = avx2_first_lanes(cols - i);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m256 w0 = W::load_tail(w + r * row_bytes, i, cols - i);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        a1[t][r] = _mm256_fmadd_ps(_mm256_maskload_ps(x + t * cols + i, m), w0, a1[t][r]);
      }
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      y[t * y_stride + r] = avx2_sum_lanes(_mm256_add_ps(a0[t][r], a1[t][r]));
    }
  }
}

// Blocks of R rows x T tokens, then the leftover rows and tokens in smaller blocks (the same
// per-element arithmetic).
template <int R, int T, class W>
void avx2_dot_blocked(const float* x, size_t n_tokens, const uint8_t* w, size_t row_bytes,
                      size_t rows, size_t cols, float* y, size_t y_stride) {
  size_t t = 0;
  for (; t + T <= n_tokens; t += T) {
    size_t r = 0;
    for (; r + R <= rows; r += R) {
      avx2_dot<R, T, W>(x + t * cols, w + r * row_bytes, row_bytes, cols, y + t * y_stride + r,
                        y_stride);
    }
    for (; r < rows; ++r) {
      avx2_dot<1, T, W>(x + t * cols, w + r * row_bytes, row_bytes, cols, y + t * y_stride + r,
                        y_stride);
    }
  }
  for (; t < n_tokens; ++t) {
    size_t r = 0;
    for (; r + 4 <= rows; r += 4) {
      avx2_dot<4, 1, W>(x + t * cols, w + r * row_bytes, row_bytes, cols, y + t * y_stride + r,
                        y_stride);
    }
    for (; r < rows; ++r) {
      avx2_dot<1, 1, W>(x + t * cols, w + r * row_bytes, row_bytes, cols, y + t * y_stride + r,
                        y_stride);
    }
  }
}

[[maybe_unused]] void avx2_dot_rows(const float* x, size_t n_tokens, const float* w, size_t rows,
                                    size_t cols, float* y, size_t y_stride) {
  avx2_dot_blocked<AVX2_DOT_R, AVX2_DOT_T, Avx2F32>(x, n_tokens,
                                                    reinterpret_cast<const uint8_t*>(w),
                                                    cols * sizeof(float), rows, cols, y, y_stride);
}

[[maybe_unused]] bool avx2_dot_rows_direct(TensorType type, const uint8_t* w, size_t row_bytes,
                                           const float* x, size_t n_tokens, size_t rows,
                                           size_t cols, float* y, size_t y_stride) {
  switch (type) {
    case TensorType::kF16:
      avx2_dot_blocked<AVX2_DOT_R, AVX2_DOT_T, Avx2F16>(x, n_tokens, w, row_bytes, rows, cols, y,
                                                        y_stride);
      return true;
    case TensorType::kBF16:
      avx2_dot_blocked<AVX2_DOT_R, AVX2_DOT_T, Avx2Bf16>(x, n_tokens, w, row_bytes, rows, cols, y,
                                                         y_stride);
      return true;
    case TensorType::kQ8_0:
      avx2_dot_blocked<AVX2_DOT_R, AVX2_DOT_T, Avx2Q8_0>(x, n_tokens, w, row_bytes, rows, cols, y,
                                                         y_stride);
      return true;
    case TensorType::kF8_E4M3_B128:
      avx2_dot_blocked<AVX2_DOT_R, AVX2_DOT_T, Avx2F8B128>(x, n_tokens, w, row_bytes, rows, cols, y,
                                                           y_stride);
      return true;
    default:
      return false;
  }
}

// ---- conversions to float -----------------------------------------------------------------

void avx2_f16_to_float(const uint8_t* src, size_t n, float* dst) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  if (i < n) {
    uint16_t h[8] = {};
    float f[8];
    std::memcpy(h, src + 2 * i, 2 * (n - i));
    _mm256_storeu_ps(f, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h))));
    std::memcpy(dst + i, f, sizeof(float) * (n - i));
  }
}

void avx2_bf16_to_float(const uint8_t* src, size_t n, float* dst) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    const __m256i f = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(f));
  }
  if (i < n) {
    uint16_t h[8] = {};
    float f[8];
    std::memcpy(h, src + 2 * i, 2 * (n - i));
    const __m128i hv = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h));
    _mm256_storeu_ps(f, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(hv), 16)));
    std::memcpy(dst + i, f, sizeof(float) * (n - i));
  }
}

// Q8_0 block: fp16 scale d, 32 int8 quants; element = float(q) * d (one rounding, as the scalar).
void avx2_q8_0_to_float(const uint8_t* src, size_t n, float* dst) {
  for (size_t b = 0; b < n / 32; ++b, src += 34, dst += 32) {
    uint16_t dh;
    std::memcpy(&dh, src, 2);
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(dh));
    for (size_t k = 0; k < 4; ++k) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + 2 + 8 * k));
      _mm256_storeu_ps(dst + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
    }
  }
}

void avx2_f8_b128_to_float(const uint8_t* src, size_t n, float* dst) {
  for (size_t b = 0; b < n / 128; ++b, src += 132, dst += 128) {
    const __m256 d = Avx2F8B128::scale(src);
    for (size_t k = 0; k < 128; k += 8)
      _mm256_storeu_ps(dst + k, Avx2F8B128::convert(src + 4 + k, d));
  }
}

bool avx2_to_float(TensorType type, const uint8_t* src, size_t n, float* dst) {
  switch (type) {
    case TensorType::kF32:
      if (n != 0) std::memcpy(dst, src, n * sizeof(float));
      return true;
    case TensorType::kF16:
      avx2_f16_to_float(src, n, dst);
      return true;
    case TensorType::kBF16:
      avx2_bf16_to_float(src, n, dst);
      return true;
    case TensorType::kQ8_0:
      avx2_q8_0_to_float(src, n, dst);
      return true;
    case TensorType::kF8_E4M3_B128:
      avx2_f8_b128_to_float(src, n, dst);
      return true;
    default:
      return false;
  }
}

}  // namespace
}  // namespace tandem::kernels::detail
