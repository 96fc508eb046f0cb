// The row and token walk shared by the SIMD Q8_0 x Q8_0 kernels (quant_dot_q8_0_*.cpp), around a
// kernel's own tile. Everything here has internal linkage on purpose: each kernel file includes it
// under its own -m flags, and one inline definition shared between them could let the linker pick
// the AVX-512 copy for an AVX2-only CPU.
//
// One token (decode, memory-bound) runs Kernel::kDecodeRows-row tiles; several tokens run
// Kernel::kRows-row x 4-token tiles (the remainder 3, 2 or 1 tokens) over row chunks of
// kChunkBytes, every token group over a chunk before the next chunk, so a large matrix (the lm
// head of a batch) comes from DRAM once. Kernel::tile<R, T>(w, row_bytes, blocks, xq, xd, y,
// y_stride) computes R rows x T tokens.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/avx2_sum_lanes.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kQ8_0Block = 32;
constexpr size_t kQ8_0BlockBytes = 34;      // fp16 d, 32 int8
constexpr size_t kQ8_0ChunkBytes = 262144;  // weight bytes per row chunk of several tokens (in L2)

float q8_0_fp16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// All rows against T tokens.
template <typename Kernel, int R, int T>
void q8_0_rows_for_tokens(const uint8_t* w, size_t row_bytes, size_t rows, size_t blocks,
                          const int8_t* xq, const float* xd, float* y, size_t y_stride) {
  size_t r = 0;
  for (; r + R <= rows; r += R) {
    Kernel::template tile<R, T>(w + r * row_bytes, row_bytes, blocks, xq, xd, y + r, y_stride);
  }
  for (; r < rows; ++r) {
    Kernel::template tile<1, T>(w + r * row_bytes, row_bytes, blocks, xq, xd, y + r, y_stride);
  }
}

template <typename Kernel>
void q8_0_dot(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x, float* y,
              size_t y_stride) {
  constexpr int kR = Kernel::kRows;
  constexpr int kD = Kernel::kDecodeRows;
  const size_t cols = x.cols;
  const size_t blocks = cols / kQ8_0Block;
  if (x.n_tokens == 1) {
    q8_0_rows_for_tokens<Kernel, kD, 1>(w, row_bytes, rows, blocks, x.qs, x.d, y, y_stride);
    return;
  }
  size_t chunk = kQ8_0ChunkBytes / row_bytes / kR * kR;
  if (chunk < static_cast<size_t>(kR)) chunk = kR;
  for (size_t r0 = 0; r0 < rows; r0 += chunk) {
    const uint8_t* wc = w + r0 * row_bytes;
    const size_t n = rows - r0 < chunk ? rows - r0 : chunk;
    size_t t = 0;
    for (; t + 4 <= x.n_tokens; t += 4) {
      q8_0_rows_for_tokens<Kernel, kR, 4>(wc, row_bytes, n, blocks, x.qs + t * cols,
                                          x.d + t * blocks, y + t * y_stride + r0, y_stride);
    }
    const size_t left = x.n_tokens - t;
    const int8_t* xq = x.qs + t * cols;
    const float* xd = x.d + t * blocks;
    float* yt = y + t * y_stride + r0;
    if (left == 3)
      q8_0_rows_for_tokens<Kernel, kR, 3>(wc, row_bytes, n, blocks, xq, xd, yt, y_stride);
    if (left == 2)
      q8_0_rows_for_tokens<Kernel, kR, 2>(wc, row_bytes, n, blocks, xq, xd, yt, y_stride);
    if (left == 1)
      q8_0_rows_for_tokens<Kernel, kD, 1>(wc, row_bytes, n, blocks, xq, xd, yt, y_stride);
  }
}

}  // namespace
}  // namespace tandem::kernels::detail
