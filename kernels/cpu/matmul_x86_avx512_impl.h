// AVX-512 (F + BW + VL) bodies of the float matmul primitives plus the table builder shared by
// matmul_avx512.cpp and matmul_avx512_vnni.cpp; anonymous namespace, so each includer gets its
// own copy compiled with its own flags. (The quantized dot products are the weight-type table's,
// not part of these tables.)
#pragma once

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__)
#error "matmul_x86_avx512_impl.h needs -mavx512f -mavx512bw -mavx512vl"
#endif

#include "kernels/cpu/matmul_x86_avx2_impl.h"

#ifndef AVX512_DOT_R
#define AVX512_DOT_R 4
#define AVX512_DOT_T 2
#endif

namespace tandem::kernels::detail {
namespace {

// Weight loaders: 16 consecutive weights of one row (row start `row`, column i, a multiple of
// 16) converted to float exactly as the *_to_float conversions below convert them; the masked
// form gives 0 in the lanes off m.
struct Avx512F32 {
  static __m512 load(const uint8_t* row, size_t i) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i);
  }
  static __m512 load(const uint8_t* row, size_t i, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + i);
  }
};

struct Avx512F16 {
  static __m512 load(const uint8_t* row, size_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
  }
  static __m512 load(const uint8_t* row, size_t i, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * i));
  }
};

struct Avx512Bf16 {
  static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 load(const uint8_t* row, size_t i) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
  }
  static __m512 load(const uint8_t* row, size_t i, __mmask16 m) {
    return widen(_mm256_maskz_loadu_epi16(m, row + 2 * i));
  }
};

struct Avx512Q8_0 {
  static __m512 load(const uint8_t* row, size_t i) {
    const uint8_t* block = row + (i / 32) * 34;
    uint16_t dh;
    std::memcpy(&dh, block, 2);
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 + i % 32));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)),
                         _mm512_set1_ps(_cvtsh_ss(dh)));
  }
  static __m512 load(const uint8_t* row, size_t i, __mmask16 m) {
    return _mm512_maskz_mov_ps(m, load(row, i));  // unused: Q8_0 rows are whole 32-blocks
  }
};

// kF8_E4M3_B128, 16 codes at a time (see avx2_fp8_as_halves and Avx2F8B128).
struct Avx512F8B128 {
  static __m512 convert(const uint8_t* codes, __m512 scale) {
    const __m256i c =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
    const __m256i halves =
        _mm256_and_si256(_mm256_slli_epi16(c, 7), _mm256_set1_epi16(static_cast<short>(0xBFFF)));
    return _mm512_mul_ps(_mm512_cvtph_ps(halves), scale);
  }
  static __m512 scale(const uint8_t* block) {
    float s;
    std::memcpy(&s, block, 4);
    return _mm512_set1_ps(s * 0x1p8f);
  }
  static __m512 load(const uint8_t* row, size_t i) {
    const uint8_t* block = row + (i / 128) * 132;
    return convert(block + 4 + i % 128, scale(block));
  }
  static __m512 load(const uint8_t* row, size_t i, __mmask16 m) {
    return _mm512_maskz_mov_ps(m, load(row, i));  // unused: rows are whole 128-blocks
  }
};

// As avx2_dot with 16 lanes: per (row, token) two FMA chains over 32-float steps, one 16-float
// step into the first, a masked tail into the second, then (a0 + a1) reduced in
// _mm512_reduce_add_ps's fixed order. Per-element operations depend neither on R and T nor on the
// weight loader (the loaders produce the same floats), so float tiles and rows read in place
// agree bit for bit. Rows are row_bytes apart.
template <int R, int T, class W>
void avx512_dot(const float* x, const uint8_t* w, size_t row_bytes, size_t cols, float* y,
                size_t y_stride) {
  __m512 a0[T][R], a1[T][R];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) a0[t][r] = a1[t][r] = _mm512_setzero_ps();
  }
  size_t i = 0;
  for (; i + 32 <= cols; i += 32) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 w0 = W::load(w + r * row_bytes, i);
      const __m512 w1 = W::load(w + r * row_bytes, i + 16);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        a0[t][r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + t * cols + i), w0, a0[t][r]);
        a1[t][r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + t * cols + i + 16), w1, a1[t][r]);
      }
    }
  }
  if (i + 16 <= cols) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 w0 = W::load(w + r * row_bytes, i);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        a0[t][r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + t * cols + i), w0, a0[t][r]);
      }
    }
    i += 16;
  }
  if (i < cols) {
    const __mmask16 m = static_cast<__mmask16>((1u << (cols - i)) - 1u);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 w0 = W::load(w + r * row_bytes, i, m);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        a1[t][r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + t * cols + i), w0, a1[t][r]);
      }
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      y[t * y_stride + r] = _mm512_reduce_add_ps(_mm512_add_ps(a0[t][r], a1[t][r]));
    }
  }
}

template <int R, int T, class W>
void avx512_dot_blocked(const float* x, size_t n_tokens, const uint8_t* w, size_t row_bytes,
                        size_t rows, size_t cols, float* y, size_t y_stride) {
  size_t t = 0;
  for (; t + T <= n_tokens; t += T) {
    size_t r = 0;
    for (; r + R <= rows; r += R) {
      avx512_dot<R, T, W>(x + t * cols, w + r * row_bytes, row_bytes, cols, y + t * y_stride + r,
                          y_stride);
    }
    for (; r < rows; ++r) {
      avx512_dot<1, T, W>(x + t * cols, w + r * row_bytes, row_bytes, cols, y + t * y_stride + r,
                          y_stride);
    }
  }
  for (; t < n_tokens; ++t) {
    size_t r = 0;
    for (; r + 4 <= rows; r += 4) {
      avx512_dot<4, 1, W>(x + t * cols, w + r * row_bytes, row_bytes, cols, y + t * y_stride + r,
                          y_stride);
    }
    for (; r < rows; ++r) {
      avx512_dot<1, 1, W>(x + t * cols, w + r * row_bytes, row_bytes, cols, y + t * y_stride + r,
                          y_stride);
    }
  }
}

void avx512_dot_rows(const float* x, size_t n_tokens, const float* w, size_t rows, size_t cols,
                     float* y, size_t y_stride) {
  avx512_dot_blocked<AVX512_DOT_R, AVX512_DOT_T, Avx512F32>(
      x, n_tokens, reinterpret_cast<const uint8_t*>(w), cols * sizeof(float), rows, cols, y,
      y_stride);
}

bool avx512_dot_rows_direct(TensorType type, const uint8_t* w, size_t row_bytes, const float* x,
                            size_t n_tokens, size_t rows, size_t cols, float* y, size_t y_stride) {
  switch (type) {
    case TensorType::kF16:
      avx512_dot_blocked<AVX512_DOT_R, AVX512_DOT_T, Avx512F16>(x, n_tokens, w, row_bytes, rows,
                                                                cols, y, y_stride);
      return true;
    case TensorType::kBF16:
      avx512_dot_blocked<AVX512_DOT_R, AVX512_DOT_T, Avx512Bf16>(x, n_tokens, w, row_bytes, rows,
                                                                 cols, y, y_stride);
      return true;
    case TensorType::kQ8_0:
      avx512_dot_blocked<AVX512_DOT_R, AVX512_DOT_T, Avx512Q8_0>(x, n_tokens, w, row_bytes, rows,
                                                                 cols, y, y_stride);
      return true;
    case TensorType::kF8_E4M3_B128:
      avx512_dot_blocked<AVX512_DOT_R, AVX512_DOT_T, Avx512F8B128>(x, n_tokens, w, row_bytes, rows,
                                                                   cols, y, y_stride);
      return true;
    default:
      return false;
  }
}

void avx512_f16_to_float(const uint8_t* src, size_t n, float* dst) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i));
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(h));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m256i h = _mm256_maskz_loadu_epi16(m, src + 2 * i);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(h));
  }
}

void avx512_bf16_to_float(const uint8_t* src, size_t n, float* dst) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i));
    _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m256i h = _mm256_maskz_loadu_epi16(m, src + 2 * i);
    const __m512 f = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    _mm512_mask_storeu_ps(dst + i, m, f);
  }
}

void avx512_q8_0_to_float(const uint8_t* src, size_t n, float* dst) {
  for (size_t b = 0; b < n / 32; ++b, src += 34, dst += 32) {
    uint16_t dh;
    std::memcpy(&dh, src, 2);
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(dh));
    for (size_t k = 0; k < 2; ++k) {
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 + 16 * k));
      _mm512_storeu_ps(dst + 16 * k, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d));
    }
  }
}

void avx512_f8_b128_to_float(const uint8_t* src, size_t n, float* dst) {
  for (size_t b = 0; b < n / 128; ++b, src += 132, dst += 128) {
    const __m512 d = Avx512F8B128::scale(src);
    for (size_t k = 0; k < 128; k += 16) {
      _mm512_storeu_ps(dst + k, Avx512F8B128::convert(src + 4 + k, d));
    }
  }
}

bool avx512_to_float(TensorType type, const uint8_t* src, size_t n, float* dst) {
  switch (type) {
    case TensorType::kF16:
      avx512_f16_to_float(src, n, dst);
      return true;
    case TensorType::kBF16:
      avx512_bf16_to_float(src, n, dst);
      return true;
    case TensorType::kQ8_0:
      avx512_q8_0_to_float(src, n, dst);
      return true;
    case TensorType::kF8_E4M3_B128:
      avx512_f8_b128_to_float(src, n, dst);
      return true;
    default:
      return avx2_to_float(type, src, n, dst);
  }
}

}  // namespace
}  // namespace tandem::kernels::detail
