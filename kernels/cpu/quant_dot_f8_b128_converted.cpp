// The F8_E4M3_B128 x BF16 dot product for many tokens (quant_dot.h): the activations widened to
// float once, the rows through an ISA's float-path tiles (to_float, then dot_rows), so each code
// is converted once per call rather than once per token tile. Built without ISA flags: it only
// calls the table it is given.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kTileFloats = 16384;  // converted weights per tile (64 KiB, L2-resident)

// The first 64-byte boundary in v (which holds 16 floats more than it needs): the kernels'
// 32- and 64-byte loads then never straddle two cache lines.
float* cache_line_aligned(std::vector<float>& v) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(v.data());
  return v.data() + (64 - a % 64) % 64 / sizeof(float);
}

}  // namespace

void dot_f8_b128_converted(const MatmulKernels& k, const uint8_t* w, size_t row_bytes, size_t rows,
                           const ActivationRows& x, float* y, size_t y_stride) {
  const size_t cols = x.cols;
  const size_t tile_rows = std::max<size_t>(4, kTileFloats / cols);
  thread_local std::vector<float> x_buffer, tile_buffer;
  x_buffer.resize(x.n_tokens * cols + 16);
  tile_buffer.resize(tile_rows * cols + 16);
  float* xf = cache_line_aligned(x_buffer);
  float* tile = cache_line_aligned(tile_buffer);
  for (size_t i = 0; i < x.n_tokens * cols; ++i) xf[i] = bf16_to_fp32(x.bf16[i]);
  for (size_t r0 = 0; r0 < rows; r0 += tile_rows) {
    const size_t n = std::min(tile_rows, rows - r0);
    for (size_t r = 0; r < n; ++r) {
      k.to_float(TensorType::kF8_E4M3_B128, w + (r0 + r) * row_bytes, cols, tile + r * cols);
    }
    k.dot_rows(xf, x.n_tokens, tile, n, cols, y + r0, y_stride);
  }
}

}  // namespace tandem::kernels::detail
