// WeightMatrix: a validated, non-owning view of a rows x cols weight matrix in any dequantizable
// TensorType, with row-tile conversion to float and embedding-row lookup (get_row).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/result.h"
#include "base/status.h"
#include "kernels/tensor_type.h"

namespace tandem::kernels {

// The byte order of a WeightMatrix's data.
//  kRows:         row r at data + r * row_bytes (every type).
//  kInterleaved8: the rows in groups of 8, group g (rows 8g .. 8g+7) at data + g * 8 * row_bytes
//                 in the type's x8 order (quant_dot.h; the types whose weight-type-table row has
//                 `interleaved_x8`), the last group padded with zero rows.
//  kRowQuads8:    the same groups in Q8_0's row-quad order (quant_dot.h; `row_quads`).
// Only the quantized path of matmul_rows reads the interleaved layouts (activation rows in the
// type's format); the float path, weight_rows_to_float and get_row take kRows only (TANDEM_CHECK).
enum class WeightLayout : uint8_t { kRows, kInterleaved8, kRowQuads8 };

// In the kRows layout row r occupies bytes [r * row_bytes, (r + 1) * row_bytes) of data;
// row_bytes = tensor_type_bytes(type, cols) in both layouts. This is the ggml layout of a 2-D
// tensor with ne0 = cols and the torch/safetensors layout of a [rows, cols] tensor. The bytes are
// owned by the caller (usually a mapped checkpoint, or an interleaved copy) and must outlive the
// view. A view is immutable and safe to share between threads.
struct WeightMatrix {
  TensorType type = TensorType::kF32;
  const uint8_t* data = nullptr;
  size_t rows = 0;
  size_t cols = 0;
  size_t row_bytes = 0;
  WeightLayout layout = WeightLayout::kRows;
  // kRows only, optional: the same rows' interleaved copy (in interleaved_layout,
  // interleaved_bytes(*this) bytes, owned by the caller), which matmul_rows's quantized path reads
  // instead of data wherever the active variant has a kernel on that layout (matmul.h). Null: the
  // rows only.
  const uint8_t* interleaved = nullptr;
  WeightLayout interleaved_layout = WeightLayout::kRows;

  // kRows only.
  const uint8_t* row_data(size_t r) const { return data + r * row_bytes; }
};

// Checks that dequantize() supports `type` (UNIMPLEMENTED otherwise), that cols is a positive
// whole number of the type's blocks and rows is positive (INVALID_ARGUMENT), and that data holds
// exactly rows * row_bytes bytes (INVALID_ARGUMENT naming both sizes). This is where sizes read
// from a checkpoint are validated; the kernels that take a WeightMatrix trust it.
Result<WeightMatrix> make_weight_matrix(TensorType type, std::span<const uint8_t> data, size_t rows,
                                        size_t cols);

// Bytes of w's interleaved copy: ceil(rows / 8) * 8 * row_bytes.
size_t interleaved_bytes(const WeightMatrix& w);

// Writes the copy of w — kRows, of a type that has `layout` (an interleaved one; checked) — in
// that layout into dst, exactly interleaved_bytes(w) bytes (checked), and returns the view of it
// (same type and shape; dst must outlive it). A plain byte permutation, any thread.
WeightMatrix interleave_rows8(const WeightMatrix& w, std::span<uint8_t> dst, WeightLayout layout);

// Converts rows [row_begin, row_end) to float into dst (row-major, w.cols floats per row).
// Unchecked beyond TANDEM_CHECKs of the bounds: a range outside the matrix or a short dst is a bug
// of the caller. Any thread; dst must not be shared with another thread.
void weight_rows_to_float(const WeightMatrix& w, size_t row_begin, size_t row_end,
                          std::span<float> dst);

// Embedding lookup: converts row `row` to float into out, which must hold exactly w.cols floats
// (INVALID_ARGUMENT otherwise). OUT_OF_RANGE naming the row and the row count when row >= w.rows
// (a token id outside the vocabulary). Any thread.
Status get_row(const WeightMatrix& w, size_t row, std::span<float> out);

}  // namespace tandem::kernels
