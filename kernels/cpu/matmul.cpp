// matmul drivers: row tiles converted once and reused across tokens, on the kernel table chosen at
// run time (matmul_dispatch.h); the quantized path through the weight-type table.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/matmul_dispatch.h"
#include "kernels/cpu/matmul_kernels.h"
#include "kernels/cpu/weight_type_table.h"

namespace tandem::kernels {
namespace {

// Floats of converted weights per tile: 64 KiB, so a tile stays in L2 while every token passes.
// With few tokens a tile is read back only a few times, so a smaller one that stays in L1 wins.
constexpr size_t kTileFloats = 16384;
constexpr size_t kSmallTileFloats = 4096;
constexpr size_t kSmallTileMaxTokens = 4;

// Up to this many tokens the float path reads F16 / BF16 / Q8_0 rows in place (where the kernel
// table can) instead of converting tiles.
constexpr size_t kFloatDirectMaxTokens = 2;

size_t tile_rows_for(size_t cols, size_t n_tokens) {
  const size_t floats = n_tokens <= kSmallTileMaxTokens ? kSmallTileFloats : kTileFloats;
  return std::max<size_t>(4, floats / cols);
}

void check_shapes(const WeightMatrix& w, size_t x_size, size_t n_tokens, size_t y_size,
                  size_t row_begin, size_t row_end) {
  TANDEM_CHECK(x_size == n_tokens * w.cols);
  TANDEM_CHECK(y_size == n_tokens * w.rows);
  TANDEM_CHECK(row_begin <= row_end && row_end <= w.rows);
}

}  // namespace

ActivationFormat matmul_activation_format(TensorType type, MatmulActivations mode) {
  if (mode == MatmulActivations::kFloat) return ActivationFormat::kF32;
  const WeightTypeKernels* row = weight_type_kernels(type);
  return row != nullptr ? row->activations : ActivationFormat::kF32;
}

WeightLayout preferred_weight_layout(TensorType type) {
  const WeightTypeKernels* row = weight_type_kernels(type);
  const MatmulVariant v = active_matmul_variant();
  if (row == nullptr || v == MatmulVariant::kScalar) return WeightLayout::kRows;
  for (const WeightLayout layout : {WeightLayout::kRowQuads8, WeightLayout::kInterleaved8}) {
    const InterleavedKernels* k = interleaved_kernels(*row, layout);
    if (k != nullptr && k->dot[static_cast<size_t>(v)] != nullptr) return layout;
  }
  return WeightLayout::kRows;
}

bool interleaved_layout_preferred(TensorType type) {
  return preferred_weight_layout(type) != WeightLayout::kRows;
}

namespace {

// The float path on rows [row_begin, row_end): y[t * y_stride + (r - row_begin)].
void float_rows(const WeightMatrix& w, const float* x, size_t n_tokens, float* y, size_t y_stride,
                size_t row_begin, size_t row_end) {
  TANDEM_CHECK_MSG(w.layout == WeightLayout::kRows,
                   "matmul: an interleaved matrix needs the quantized path");
  const detail::MatmulKernels& k = detail::active_matmul_kernels();
  const size_t cols = w.cols;
  if (n_tokens <= kFloatDirectMaxTokens &&
      k.dot_rows_direct(w.type, w.row_data(row_begin), w.row_bytes, x, n_tokens,
                        row_end - row_begin, cols, y, y_stride)) {
    return;
  }
  const size_t tile_rows = tile_rows_for(cols, n_tokens);
  // F32 rows aligned for float are dotted in place (the mapped bytes have no other type).
  const bool direct = w.type == TensorType::kF32 &&
                      reinterpret_cast<uintptr_t>(w.data) % alignof(float) == 0 &&
                      w.row_bytes == cols * sizeof(float);
  // The tile starts on a cache line (16 floats of slack): the kernels' 32- and 64-byte loads of
  // it then never straddle two lines (an unaligned tile cost the AVX2 kernels about 30 %).
  thread_local std::vector<float> tile_buffer;
  if (!direct && tile_buffer.size() < tile_rows * cols + 16) {
    tile_buffer.resize(tile_rows * cols + 16);
  }
  const uintptr_t at = reinterpret_cast<uintptr_t>(tile_buffer.data());
  const std::span<float> tile(tile_buffer.data() + (64 - at % 64) % 64 / sizeof(float),
                              direct ? 0 : tile_rows * cols);
  for (size_t r0 = row_begin; r0 < row_end; r0 += tile_rows) {
    const size_t r1 = std::min(row_end, r0 + tile_rows);
    const float* rows = tile.data();
    if (direct) {
      rows = reinterpret_cast<const float*>(w.row_data(r0));
    } else if (!k.to_float(w.type, w.row_data(r0), (r1 - r0) * cols, tile.data())) {
      weight_rows_to_float(w, r0, r1, tile.subspan(0, (r1 - r0) * cols));
    }
    k.dot_rows(x, n_tokens, rows, r1 - r0, cols, y + (r0 - row_begin), y_stride);
  }
}

}  // namespace

void matmul_rows(const WeightMatrix& w, const ActivationRows& x, float* y, size_t y_stride,
                 size_t row_begin, size_t row_end) {
  TANDEM_CHECK(x.cols == w.cols);
  TANDEM_CHECK(row_begin <= row_end && row_end <= w.rows);
  TANDEM_CHECK(y_stride >= row_end - row_begin);
  if (x.n_tokens == 0 || row_begin == row_end) return;
  if (x.format == ActivationFormat::kF32) {
    float_rows(w, x.f32, x.n_tokens, y, y_stride, row_begin, row_end);
    return;
  }
  const WeightTypeKernels* row = weight_type_kernels(w.type);
  TANDEM_CHECK(row != nullptr && row->activations == x.format);
  const size_t variant = static_cast<size_t>(active_matmul_variant());
  if (w.layout != WeightLayout::kRows) {
    const InterleavedKernels* k = interleaved_kernels(*row, w.layout);
    TANDEM_CHECK(k != nullptr);
    detail::InterleavedDotFn dot = k->dot[variant];
    if (dot == nullptr) dot = k->dot[static_cast<size_t>(MatmulVariant::kScalar)];
    dot(w.data, row_begin, row_end, x, y, y_stride);
    return;
  }
  if (w.interleaved != nullptr) {
    const InterleavedKernels* k = interleaved_kernels(*row, w.interleaved_layout);
    TANDEM_CHECK(k != nullptr);
    if (k->dot[variant] != nullptr) {
      k->dot[variant](w.interleaved, row_begin, row_end, x, y, y_stride);
      return;
    }
  }
  const detail::QuantDotFn dot = row->dot[variant];
  dot(w.row_data(row_begin), w.row_bytes, row_end - row_begin, x, y, y_stride);
}

void matmul_rows(const WeightMatrix& w, std::span<const float> x, size_t n_tokens,
                 std::span<float> y, size_t row_begin, size_t row_end) {
  check_shapes(w, x.size(), n_tokens, y.size(), row_begin, row_end);
  if (n_tokens == 0 || row_begin == row_end) return;
  float_rows(w, x.data(), n_tokens, y.data() + row_begin, w.rows, row_begin, row_end);
}

void matmul(const WeightMatrix& w, std::span<const float> x, size_t n_tokens, std::span<float> y,
            MatmulActivations mode) {
  check_shapes(w, x.size(), n_tokens, y.size(), 0, w.rows);
  const ActivationFormat format = matmul_activation_format(w.type, mode);
  if (format == ActivationFormat::kF32) {
    matmul_rows(w, x, n_tokens, y, 0, w.rows);
    return;
  }
  thread_local QuantizedActivations xq;
  quantize_activations(format, x, n_tokens, w.cols, xq);
  matmul_rows(w, view_of(xq), y.data(), w.rows, 0, w.rows);
}

}  // namespace tandem::kernels
