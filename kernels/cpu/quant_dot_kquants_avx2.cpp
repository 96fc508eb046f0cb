// The AVX2 K-quant and IQ4_XS dot kernels of the weight-type table (built with -mavx2 -mfma -mf16c
// -ffp-contract=off; called only when cpu_features() reports them): quant_dot_kquants_tiles.h's,
// quant_dot_q2_q3_k_tiles.h's and quant_dot_iq4_xs_tiles.h's templates with the scaled pair sums
// as madd + add (in program order: simd_chain.h).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/simd_chain.h"

namespace tandem::kernels::detail {
namespace {

[[gnu::always_inline]] inline __m256i kq_madd_add(__m256i acc, __m256i p, __m256i s) {
  return chain_barrier(_mm256_add_epi32(acc, _mm256_madd_epi16(p, s)));
}

// The batched Q2_K / Q3_K tiles (quant_dot_q2_q3_k_batched.h): unscaled quants, maddubs then the
// scaled madd; 2 rows x 4 tokens keep the 8 accumulators and their operands in 16 registers.
struct Q23BatchIsa {
  static constexpr bool kPremultiplied = false;
  // At 4 tokens the plain-row tiles measured faster for Q2_K (matmul_bench 768 x 2048).
  static constexpr size_t kMinTokens = 8;
  static constexpr size_t kMinPassTokens = 4;
  static constexpr int kRows = 2;
  static __m256i step(__m256i acc, __m256i u, __m256i x, __m256i s) {
    return kq_madd_add(acc, _mm256_maddubs_epi16(u, x), s);
  }
};

}  // namespace
}  // namespace tandem::kernels::detail

#include "kernels/cpu/quant_dot_iq4_xs_tiles.h"
#include "kernels/cpu/quant_dot_kquants_tiles.h"
#include "kernels/cpu/quant_dot_q23_k_lanes.h"
#include "kernels/cpu/quant_dot_q2_q3_k_batched.h"
#include "kernels/cpu/quant_dot_q2_q3_k_tiles.h"
#include "kernels/cpu/quant_dot_x8_lanes_avx2.h"

namespace tandem::kernels::detail {
namespace {

// Q3_K takes the tokens in the lanes from LanesAvx2::kMinTokens (16), Q2_K from 32: on a Zen 4
// thread, 768 x 2048, Q2_K 141 -> 167 and 144 -> 170 GFLOP/s at 64 and 128 tokens but 142 -> 131
// at 16 (Q3_K: 142 -> 151, 153 -> 196, 154 -> 201 at 16, 64, 128).
constexpr size_t kQ2KLanesMinTokens = 32;

}  // namespace

void dot_q4_k_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride) {
  dot_rows<Q4KTiles>(w, row_bytes, rows, x, y, y_stride);
}

void dot_q5_k_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride) {
  dot_rows<Q5KTiles>(w, row_bytes, rows, x, y, y_stride);
}

void dot_q6_k_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride) {
  dot_rows<Q6KTiles>(w, row_bytes, rows, x, y, y_stride);
}

void dot_q2_k_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride) {
  if (x.n_tokens >= kQ2KLanesMinTokens) {
    rows_lanes_dot<LanesAvx2, Q23KLanes<false, false>>(w, row_bytes, rows, x, y, y_stride,
                                                       dot_q23_k<false>);
    return;
  }
  dot_q23_k<false>(w, row_bytes, rows, x, y, y_stride);
}

void dot_q3_k_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride) {
  if (x.n_tokens >= LanesAvx2::kMinTokens) {
    rows_lanes_dot<LanesAvx2, Q23KLanes<true, false>>(w, row_bytes, rows, x, y, y_stride,
                                                      dot_q23_k<true>);
    return;
  }
  dot_q23_k<true>(w, row_bytes, rows, x, y, y_stride);
}

void dot_iq4_xs_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride) {
  dot_rows<Iq4XsTiles>(w, row_bytes, rows, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
