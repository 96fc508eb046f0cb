// The 6-bit scales and mins of one super-block of a Q4_K x8 group (quant_dot.h's layout),
// unpacked to one byte per entry, for the x8 kernel files (quant_dot_q45_k_x8_tiles.h, the AMX
// kernel). AVX2 code with internal linkage: each including file compiles it under its own -m
// flags (see quant_dot_kquants_tiles.h for why nothing SIMD is shared across files).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tandem::kernels::detail {
namespace {

// sc[e], mn[e] = the scale and min entry e = 8j + i (row i, sub-block j) of the group super-block
// at blk; 32-byte aligned outputs of 64 bytes.
[[gnu::always_inline]] inline void q4_k_x8_scale_bytes(const uint8_t* blk, uint8_t* sc,
                                                       uint8_t* mn) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i top2 = _mm256_set1_epi8(0x30);
  const __m256i sv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32));
  const __m256i mv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64));
  const __m256i hv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 96));
  _mm256_store_si256(reinterpret_cast<__m256i*>(sc),
                     _mm256_or_si256(_mm256_and_si256(sv, low4),
                                     _mm256_and_si256(_mm256_slli_epi16(hv, 4), top2)));
  _mm256_store_si256(reinterpret_cast<__m256i*>(sc + 32),
                     _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(sv, 4), low4),
                                     _mm256_and_si256(_mm256_slli_epi16(hv, 2), top2)));
  _mm256_store_si256(reinterpret_cast<__m256i*>(mn),
                     _mm256_or_si256(_mm256_and_si256(mv, low4), _mm256_and_si256(hv, top2)));
  _mm256_store_si256(reinterpret_cast<__m256i*>(mn + 32),
                     _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(mv, 4), low4),
                                     _mm256_and_si256(_mm256_srli_epi16(hv, 2), top2)));
}

}  // namespace
}  // namespace tandem::kernels::detail
