// The walk of the kernels with BF16 activations (BF16 weights: quant_dot_bf16_avx2.cpp,
// quant_dot_bf16_avx512.cpp; FP8 weights: quant_dot_f8_b128_avx2.cpp, quant_dot_f8_b128_avx512.cpp)
// over rows and tokens, around a kernel's own tile. Everything here has internal linkage (see
// quant_dot_kquants_tiles.h for why): each kernel file includes it under its own -m flags.
//
// Row chunks of about kBf16ChunkBytes, every token over a chunk before the next chunk, so a matrix
// larger than the caches (the lm head of a batch) comes from memory once however many tokens
// there are; within a chunk kR-row x kT-token tiles, then one tile of the tokens left (fewer than
// kT), each with the remainder rows one at a time.
// `Kernel::template tile<R, T>(w, x, cols, y, y_stride)` computes R weight rows (w[r], in the
// weight type's layout) x T activation rows (x[t]), cols values each: y[t * y_stride + r].
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/activation_rows.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kBf16ChunkBytes = 262144;

// Rows [r0, r0 + R) x tokens [t0, t0 + T) through Kernel's tile.
template <typename Kernel, int R, int T>
void bf16_tile(const uint8_t* w, size_t row_bytes, size_t r0, const ActivationRows& x, size_t t0,
               float* y, size_t y_stride) {
  const uint8_t* wr[R];
  const uint16_t* xt[T];
  for (int r = 0; r < R; ++r) wr[r] = w + (r0 + static_cast<size_t>(r)) * row_bytes;
  for (int t = 0; t < T; ++t) xt[t] = x.bf16 + (t0 + static_cast<size_t>(t)) * x.cols;
  Kernel::template tile<R, T>(wr, xt, x.cols, y + t0 * y_stride + r0, y_stride);
}

// The tokens [t, n) left after the kT-token tiles (fewer than kT): one tile of all of them over
// rows [r0, r1).
template <typename Kernel, int kR, int T>
void bf16_rest(const uint8_t* w, size_t row_bytes, size_t r0, size_t r1, const ActivationRows& x,
               size_t t, float* y, size_t y_stride) {
  if constexpr (T > 0) {
    if (x.n_tokens - t == static_cast<size_t>(T)) {
      size_t r = r0;
      for (; r + kR <= r1; r += kR) bf16_tile<Kernel, kR, T>(w, row_bytes, r, x, t, y, y_stride);
      for (; r < r1; ++r) bf16_tile<Kernel, 1, T>(w, row_bytes, r, x, t, y, y_stride);
      return;
    }
    bf16_rest<Kernel, kR, T - 1>(w, row_bytes, r0, r1, x, t, y, y_stride);
  }
}

// The QuantDotFn contract (quant_dot.h) on Kernel's kR-row x kT-token tiles.
template <typename Kernel, int kR, int kT>
void bf16_dot(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x, float* y,
              size_t y_stride) {
  constexpr size_t R = kR, T = kT;
  size_t chunk = kBf16ChunkBytes / row_bytes / R * R;
  if (chunk < R) chunk = R;
  for (size_t r0 = 0; r0 < rows; r0 += chunk) {
    const size_t r1 = rows - r0 < chunk ? rows : r0 + chunk;
    size_t t = 0;
    for (; t + T <= x.n_tokens; t += T) {
      size_t r = r0;
      for (; r + R <= r1; r += R) bf16_tile<Kernel, kR, kT>(w, row_bytes, r, x, t, y, y_stride);
      for (; r < r1; ++r) bf16_tile<Kernel, 1, kT>(w, row_bytes, r, x, t, y, y_stride);
    }
    bf16_rest<Kernel, kR, kT - 1>(w, row_bytes, r0, r1, x, t, y, y_stride);
  }
}

}  // namespace
}  // namespace tandem::kernels::detail
