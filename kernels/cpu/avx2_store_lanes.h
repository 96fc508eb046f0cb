// Stores lanes [lane_begin, lane_end) of a __m256 of eight row results to out[0 ..), for the
// AVX2-and-up kernel files whose tiles hold eight rows in the lanes of a register. Internal linkage
// on purpose (as quant_dot_kquants_tiles.h explains): each includer compiles its own copy under its
// own -m flags.
#pragma once

#include <immintrin.h>

#include <cstddef>

namespace tandem::kernels::detail {
namespace {

[[maybe_unused]] [[gnu::always_inline]] inline void avx2_store_lanes(float* out, __m256 v,
                                                                     size_t lane_begin,
                                                                     size_t lane_end) {
  if (lane_begin == 0 && lane_end == 8) {
    _mm256_storeu_ps(out, v);
    return;
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, v);
  for (size_t i = lane_begin; i < lane_end; ++i) out[i - lane_begin] = lanes[i];
}

}  // namespace
}  // namespace tandem::kernels::detail
