// WeightMatrix validation, the interleaved copy, row conversion through dequantize(), and get_row.
#include "kernels/cpu/weight_matrix.h"

#include <limits>
#include <string>

#include "base/check.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/weight_type_table.h"

namespace tandem::kernels {

Result<WeightMatrix> make_weight_matrix(TensorType type, std::span<const uint8_t> data, size_t rows,
                                        size_t cols) {
  const std::string name(tensor_type_name(type));
  if (!dequantize_supported(type)) {
    return unimplemented_error("weight matrix: type " + name +
                               " is not supported; supported: " + dequantize_supported_names());
  }
  if (rows == 0 || cols == 0) {
    return invalid_argument_error("weight matrix: empty shape " + std::to_string(rows) + " x " +
                                  std::to_string(cols));
  }
  const Result<uint64_t> row_bytes = tensor_type_bytes(type, cols);
  if (!row_bytes.ok()) return row_bytes.status().with_prefix("weight matrix row of " + name);
  if (*row_bytes > std::numeric_limits<size_t>::max() / rows) {
    return out_of_range_error("weight matrix: " + std::to_string(rows) + " rows of " +
                              std::to_string(*row_bytes) + " bytes overflow");
  }
  const size_t want = static_cast<size_t>(*row_bytes) * rows;
  if (data.size() != want) {
    return invalid_argument_error(
        "weight matrix: " + std::to_string(rows) + " x " + std::to_string(cols) + " " + name +
        " needs " + std::to_string(want) + " bytes, got " + std::to_string(data.size()));
  }
  WeightMatrix w;
  w.type = type;
  w.data = data.data();
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = static_cast<size_t>(*row_bytes);
  return w;
}

size_t interleaved_bytes(const WeightMatrix& w) {
  return (w.rows + 7) / 8 * 8 * w.row_bytes;
}

WeightMatrix interleave_rows8(const WeightMatrix& w, std::span<uint8_t> dst, WeightLayout layout) {
  TANDEM_CHECK(w.layout == WeightLayout::kRows && layout != WeightLayout::kRows);
  const WeightTypeKernels* row = weight_type_kernels(w.type);
  const InterleavedKernels* kernels = row != nullptr ? interleaved_kernels(*row, layout) : nullptr;
  TANDEM_CHECK_MSG(kernels != nullptr, "interleave_rows8: the type does not have this layout");
  TANDEM_CHECK(dst.size() == interleaved_bytes(w));
  kernels->repack(w.data, w.row_bytes, w.rows, dst.data());
  WeightMatrix out = w;
  out.data = dst.data();
  out.layout = layout;
  out.interleaved = nullptr;
  out.interleaved_layout = WeightLayout::kRows;
  return out;
}

void weight_rows_to_float(const WeightMatrix& w, size_t row_begin, size_t row_end,
                          std::span<float> dst) {
  TANDEM_CHECK_MSG(w.layout == WeightLayout::kRows, "weight_rows_to_float: interleaved matrix");
  TANDEM_CHECK(row_begin <= row_end && row_end <= w.rows);
  const size_t n = row_end - row_begin;
  TANDEM_CHECK(dst.size() >= n * w.cols);
  if (n == 0) return;
  // Rows are contiguous, so a row range is one run of whole blocks.
  const Status status =
      dequantize(w.type, std::span<const uint8_t>(w.row_data(row_begin), n * w.row_bytes),
                 dst.first(n * w.cols));
  TANDEM_CHECK_MSG(status.ok(), status.message().c_str());  // make_weight_matrix validated it
}

Status get_row(const WeightMatrix& w, size_t row, std::span<float> out) {
  if (row >= w.rows) {
    return out_of_range_error("get_row: row " + std::to_string(row) + " of a matrix with " +
                              std::to_string(w.rows) + " rows");
  }
  if (out.size() != w.cols) {
    return invalid_argument_error("get_row: output holds " + std::to_string(out.size()) +
                                  " floats, the row has " + std::to_string(w.cols));
  }
  weight_rows_to_float(w, row, row + 1, out);
  return Status::ok_status();
}

}  // namespace tandem::kernels
