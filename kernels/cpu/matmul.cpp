// Scalar reference matmul: tiled row conversion with reuse across tokens; Q8_0 int8 path.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/base/check.h"
#include "kernels/cpu/float_convert.h"

namespace tandem::kernels {
namespace {

// Floats of converted weights per tile: 64 KiB, so a tile stays in L2 while every token passes.
constexpr size_t kTileFloats = 16384;

size_t tile_rows_for(size_t cols) {
  return std::max<size_t>(1, kTileFloats / cols);
}

void check_shapes(const WeightMatrix& w, size_t x_size, size_t n_tokens, size_t y_size,
                  size_t row_begin, size_t row_end) {
  TANDEM_CHECK(x_size == n_tokens * w.cols);
  TANDEM_CHECK(y_size == n_tokens * w.rows);
  TANDEM_CHECK(row_begin <= row_end && row_end <= w.rows);
}

}  // namespace

void matmul_rows(const WeightMatrix& w, std::span<const float> x, size_t n_tokens,
                 std::span<float> y, size_t row_begin, size_t row_end) {
  check_shapes(w, x.size(), n_tokens, y.size(), row_begin, row_end);
  if (n_tokens == 0 || row_begin == row_end) return;
  const size_t cols = w.cols;
  const size_t tile_rows = tile_rows_for(cols);
  thread_local std::vector<float> tile;
  if (tile.size() < tile_rows * cols) tile.resize(tile_rows * cols);
  for (size_t r0 = row_begin; r0 < row_end; r0 += tile_rows) {
    const size_t r1 = std::min(row_end, r0 + tile_rows);
    weight_rows_to_float(w, r0, r1, tile);
    for (size_t t = 0; t < n_tokens; ++t) {
      const float* xt = x.data() + t * cols;
      float* yt = y.data() + t * w.rows;
      for (size_t r = r0; r < r1; ++r) yt[r] = dot_f32(xt, tile.data() + (r - r0) * cols, cols);
    }
  }
}

void matmul_rows_q8_0(const WeightMatrix& w, const Q8_0Activations& xq, std::span<float> y,
                      size_t row_begin, size_t row_end) {
  TANDEM_CHECK(w.type == TensorType::kQ8_0);
  TANDEM_CHECK(xq.cols == w.cols);
  TANDEM_CHECK(xq.qs.size() == xq.n_tokens * w.cols);
  check_shapes(w, xq.qs.size(), xq.n_tokens, y.size(), row_begin, row_end);
  if (xq.n_tokens == 0 || row_begin == row_end) return;
  const size_t cols = w.cols;
  const size_t blocks = cols / kQ8_0BlockElements;
  // Unpack a tile of weight rows once (scales to float, quants contiguous), then reuse it for
  // every token.
  const size_t tile_rows = std::max<size_t>(1, 4 * kTileFloats / cols);
  thread_local std::vector<int8_t> wq;
  thread_local std::vector<float> wd;
  if (wq.size() < tile_rows * cols) wq.resize(tile_rows * cols);
  if (wd.size() < tile_rows * blocks) wd.resize(tile_rows * blocks);
  for (size_t r0 = row_begin; r0 < row_end; r0 += tile_rows) {
    const size_t r1 = std::min(row_end, r0 + tile_rows);
    for (size_t r = r0; r < r1; ++r) {
      const uint8_t* src = w.row_data(r);
      for (size_t b = 0; b < blocks; ++b, src += kQ8_0BlockBytes) {
        wd[(r - r0) * blocks + b] = fp16_to_fp32(load_le16(src));
        for (size_t j = 0; j < kQ8_0BlockElements; ++j) {
          wq[(r - r0) * cols + b * kQ8_0BlockElements + j] = static_cast<int8_t>(src[2 + j]);
        }
      }
    }
    for (size_t t = 0; t < xq.n_tokens; ++t) {
      const int8_t* xt = xq.qs.data() + t * cols;
      const float* xd = xq.d.data() + t * blocks;
      float* yt = y.data() + t * w.rows;
      for (size_t r = r0; r < r1; ++r) {
        const int8_t* wr = wq.data() + (r - r0) * cols;
        const float* wrd = wd.data() + (r - r0) * blocks;
        float sum = 0.0f;
        for (size_t b = 0; b < blocks; ++b) {
          int32_t sumi = 0;
          for (size_t j = 0; j < kQ8_0BlockElements; ++j) {
            sumi += static_cast<int32_t>(wr[b * kQ8_0BlockElements + j]) *
                    static_cast<int32_t>(xt[b * kQ8_0BlockElements + j]);
          }
          sum += static_cast<float>(sumi) * (wrd[b] * xd[b]);
        }
        yt[r] = sum;
      }
    }
  }
}

void matmul(const WeightMatrix& w, std::span<const float> x, size_t n_tokens, std::span<float> y,
            MatmulActivations mode) {
  if (mode == MatmulActivations::kQ8_0 && w.type == TensorType::kQ8_0) {
    thread_local Q8_0Activations xq;
    quantize_q8_0_activations(x, n_tokens, w.cols, xq);
    matmul_rows_q8_0(w, xq, y, 0, w.rows);
    return;
  }
  matmul_rows(w, x, n_tokens, y, 0, w.rows);
}

}  // namespace tandem::kernels
