// AVX2 (+FMA +F16C) dot products of Q4_K and Q5_K weights in their interleaved x8 layouts with
// Q8_K activations (quant_dot_q45_k_x8_tiles.h), bit-identical to dot_q4_k_scalar /
// dot_q5_k_scalar: maddubs products summed in int16, one vpmaddwd by the sub-block scale per
// chain (in program order: simd_chain.h). Built with -mavx2 -mfma -mf16c -ffp-contract=off but
// linked into binaries that run on any x86-64: only the exported functions have external linkage.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/simd_chain.h"

namespace tandem::kernels::detail {
namespace {

// acc holds int16 pairs: maddubs adds two products of a quant (0..kQuantMax) and an activation
// quant (-128..127) per int16, at most 2 * kQuantMax * 128 in magnitude (Q4_K 3840, Q5_K 7936);
// exact_steps of them stay within int16 (Q4_K 8, Q5_K 4), so nothing saturates or wraps. The scale
// (0..63) sits in both int16 halves of its lane, so vpmaddwd gives scale * (sum of the two halves)
// in int32, exact.
struct Q45KX8Isa {
  // The tiles of up to 4 tokens prefetch this far ahead (prefetch_ahead.h): on a first-generation
  // Zen EPYC the hardware prefetchers alone left them streaming at 70-80 % of their in-cache rate.
  static constexpr size_t kPrefetchAhead = 2048;
  // Calls of up to this many tokens expand their activations (quant_dot_q8k_x8_call.h): on a
  // first-generation Zen EPYC a broadcast from memory takes a slot of the vector pipes the
  // multiplies need, and a load does not. One thread, 768 x 2048: Q4_K one token 30.2 -> 33.8
  // GFLOP/s streaming 256 MiB, three tokens 40.4 -> 44.4 in cache; Q5_K one token 20.5 -> 22.2
  // streaming; with four tokens Q4_K gained nothing and Q5_K lost 5 %. Whole Q4_K_M model,
  // decode: 47.1 -> 49.2 tok/s with 2 threads (mean of six runs each), 27.5-27.8 -> 29.0-30.0
  // with one.
  static constexpr size_t kExpandTokens = 3;
  template <int kQuantMax>
  static constexpr int exact_steps() {
    return 32767 / (2 * kQuantMax * 128);
  }
  static __m256i scale_vector(__m256i s32) {
    return _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16));
  }
  static __m256i step(__m256i acc, __m256i w, __m256i x) {
    return chain_barrier(_mm256_add_epi16(acc, _mm256_maddubs_epi16(w, x)));
  }
  static __m256i merge(__m256i a, __m256i b) { return _mm256_add_epi16(a, b); }
  static __m256i finish(__m256i isum, __m256i acc, __m256i scale) {
    return _mm256_add_epi32(isum, _mm256_madd_epi16(acc, scale));
  }
};

}  // namespace
}  // namespace tandem::kernels::detail

#include "kernels/cpu/quant_dot_q45_k_x8_lanes.h"
#include "kernels/cpu/quant_dot_q45_k_x8_tiles.h"
#include "kernels/cpu/quant_dot_x8_lanes_avx2.h"

namespace tandem::kernels::detail {

// Q4_K keeps its x8 tiles for any number of tokens: with four-bit weights their int16 chains run
// eight steps, and they beat the tokens-in-lanes walk on a Zen 4 (199 against 167-188 GFLOP/s
// per thread from 16 to 128 tokens), which Q5_K and Q6_K take from 16 tokens.
void dot_q4_k_x8_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                      const ActivationRows& x, float* y, size_t y_stride) {
  dot_q4_k_x8(groups, row_begin, row_end, x, y, y_stride);
}

void dot_q5_k_x8_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                      const ActivationRows& x, float* y, size_t y_stride) {
  if (x.n_tokens >= LanesAvx2::kMinTokens) {
    x8_lanes_dot<LanesAvx2, Q45KLanes<Q5KX8Format>>(groups, row_begin, row_end, x, y, y_stride,
                                                    dot_q5_k_x8, dot_q5_k_x8);
    return;
  }
  dot_q5_k_x8(groups, row_begin, row_end, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
