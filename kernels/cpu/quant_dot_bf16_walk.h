// The walk of the BF16 x BF16 kernels (quant_dot_bf16_avx2.cpp, quant_dot_bf16_avx512.cpp) over
// rows and tokens, around a kernel's own tile. Everything here has internal linkage (see
// quant_dot_kquants_tiles.h for why): each kernel file includes it under its own -m flags.
//
// Row chunks of about kBf16ChunkBytes, every token over a chunk before the next chunk, so a matrix
// larger than the caches (the lm head of a batch) comes from memory once however many tokens
// there are; within a chunk kR-row x kT-token tiles, then the remainder rows and tokens.
// `tiles.template run<R, T>(r, t)` computes rows [r, r + R) x tokens [t, t + T).
#pragma once

#include <cstddef>

namespace tandem::kernels::detail {
namespace {

constexpr size_t kBf16ChunkBytes = 262144;

template <int kR, int kT, typename Tiles>
void bf16_walk(size_t row_bytes, size_t rows, size_t n_tokens, const Tiles& tiles) {
  constexpr size_t R = kR, T = kT;
  size_t chunk = kBf16ChunkBytes / row_bytes / R * R;
  if (chunk < R) chunk = R;
  for (size_t r0 = 0; r0 < rows; r0 += chunk) {
    const size_t r1 = rows - r0 < chunk ? rows : r0 + chunk;
    size_t t = 0;
    for (; t + T <= n_tokens; t += T) {
      size_t r = r0;
      for (; r + R <= r1; r += R) tiles.template run<kR, kT>(r, t);
      for (; r < r1; ++r) tiles.template run<1, kT>(r, t);
    }
    for (; t < n_tokens; ++t) {
      size_t r = r0;
      for (; r + R <= r1; r += R) tiles.template run<kR, 1>(r, t);
      for (; r < r1; ++r) tiles.template run<1, 1>(r, t);
    }
  }
}

}  // namespace
}  // namespace tandem::kernels::detail
