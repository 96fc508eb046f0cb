// The AVX-512 VNNI K-quant and IQ4_XS dot kernels of the weight-type table (built with the AVX-512
// flags plus -mavx512vnni; called only when cpu_features() reports AVX-512 F/BW/VL and VNNI):
// quant_dot_kquants_tiles.h's, quant_dot_q2_q3_k_tiles.h's and quant_dot_iq4_xs_tiles.h's templates
// with the scaled pair sums as one vpdpwssd (the exact int32 sum madd + add gives, one instruction
// instead of two), on the same 256-bit lanes.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {
namespace {

[[gnu::always_inline]] inline __m256i kq_madd_add(__m256i acc, __m256i p, __m256i s) {
  return _mm256_dpwssd_epi32(acc, p, s);
}

// The batched Q2_K / Q3_K tiles (quant_dot_q2_q3_k_batched.h): scale-premultiplied quants, one
// vpdpbusd per 32 elements; 4 rows x 4 tokens use 16 of the 32 vector registers as accumulators.
// From 3 tokens, with a 4 rows x 3 tokens pass for a last group of three (matmul_bench 768 x
// 2048, Q2_K 3 tokens 68 -> 81-90 GFLOP/s); a 2-token pass measured no faster than the plain-row
// 2 x 2 tiles.
struct Q23BatchIsa {
  static constexpr bool kPremultiplied = true;
  static constexpr size_t kMinTokens = 3;
  static constexpr size_t kMinPassTokens = 3;
  static constexpr int kRows = 4;
  static __m256i step(__m256i acc, __m256i u, __m256i x, __m256i) {
    return _mm256_dpbusd_epi32(acc, u, x);
  }
};

}  // namespace
}  // namespace tandem::kernels::detail

#include "kernels/cpu/quant_dot_iq4_xs_lanes.h"
#include "kernels/cpu/quant_dot_iq4_xs_tiles.h"
#include "kernels/cpu/quant_dot_kquants_tiles.h"
#include "kernels/cpu/quant_dot_q23_k_lanes.h"
#include "kernels/cpu/quant_dot_q2_q3_k_batched.h"
#include "kernels/cpu/quant_dot_q2_q3_k_tiles.h"
#include "kernels/cpu/quant_dot_x8_lanes_avx512.h"

namespace tandem::kernels::detail {
namespace {

// Q2_K and Q3_K take the tokens in the lanes (scales premultiplied into the weights) from 64
// tokens: on a Zen 4 thread, 768 x 2048, Q3_K 257 -> 314 and 269 -> 341 GFLOP/s at 64 and 128
// tokens (Q2_K 240 -> 270, 244 -> 289), while the batched tiles stay ahead at 16 to 40 tokens
// (Q3_K at 40: 273 against 250).
constexpr size_t kQ23LanesMinTokens = 64;

}  // namespace

void dot_q4_k_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride) {
  dot_rows<Q4KTiles>(w, row_bytes, rows, x, y, y_stride);
}

void dot_q5_k_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride) {
  dot_rows<Q5KTiles>(w, row_bytes, rows, x, y, y_stride);
}

void dot_q6_k_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride) {
  dot_rows<Q6KTiles>(w, row_bytes, rows, x, y, y_stride);
}

void dot_q2_k_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride) {
  if (x.n_tokens >= kQ23LanesMinTokens) {
    rows_lanes_dot<LanesAvx512, Q23KLanes<false, true>>(w, row_bytes, rows, x, y, y_stride,
                                                        dot_q23_k<false>);
    return;
  }
  dot_q23_k<false>(w, row_bytes, rows, x, y, y_stride);
}

void dot_q3_k_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride) {
  if (x.n_tokens >= kQ23LanesMinTokens) {
    rows_lanes_dot<LanesAvx512, Q23KLanes<true, true>>(w, row_bytes, rows, x, y, y_stride,
                                                       dot_q23_k<true>);
    return;
  }
  dot_q23_k<true>(w, row_bytes, rows, x, y, y_stride);
}

void dot_iq4_xs_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows,
                            const ActivationRows& x, float* y, size_t y_stride) {
  if (x.n_tokens >= LanesAvx512::kMinTokens) {
    rows_lanes_dot<LanesAvx512, Iq4XsLanes>(w, row_bytes, rows, x, y, y_stride,
                                            dot_rows<Iq4XsTiles>);
    return;
  }
  dot_rows<Iq4XsTiles>(w, row_bytes, rows, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
