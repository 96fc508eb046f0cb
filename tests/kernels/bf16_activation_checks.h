// Checks shared by the tests of the weight types paired with BF16 activations (BF16, FP8
// f8_e4m3_b128): the split invariance of a kernel's rows and the agreement of the float and the
// quantized matmul modes.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/weight_matrix.h"
#include "kernels/tensor_type.h"

namespace tandem::kernels::testing {

// `part` (a call on rows [r0, r1) of a y buffer filled with NaN, as a thread pool's split) against
// `whole` (all rows): the number of elements inside the range whose bits differ and of elements
// outside it that were written.
inline size_t split_mismatches(const std::vector<float>& whole, const std::vector<float>& part,
                               size_t tokens, size_t rows, size_t r0, size_t r1) {
  size_t bad = 0;
  for (size_t t = 0; t < tokens; ++t) {
    for (size_t r = 0; r < rows; ++r) {
      const float p = part[t * rows + r];
      const bool inside = r >= r0 && r < r1;
      if (inside ? std::memcmp(&p, &whole[t * rows + r], 4) != 0 : !std::isnan(p)) ++bad;
    }
  }
  return bad;
}

// The float mode (float activations) and the quantized mode (activations rounded to bfloat16, a
// relative 2^-9 per element) of matmul on `rows` x `cols` weights of `type` agree within 2^-8 of
// each output's sum of |w * x|, for three random activation rows.
inline void check_modes_agree(TensorType type, std::span<const uint8_t> bytes, size_t rows,
                              size_t cols, std::mt19937& rng) {
  const size_t tokens = 3;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(tokens * cols);
  for (float& f : x) f = normal(rng);
  auto w = make_weight_matrix(type, bytes, rows, cols);
  REQUIRE(w.ok());
  std::vector<float> y_float(tokens * rows), y_bf16(tokens * rows);
  matmul(*w, x, tokens, y_float, MatmulActivations::kFloat);
  matmul(*w, x, tokens, y_bf16, MatmulActivations::kQuantized);
  std::vector<float> wf(rows * cols);
  weight_rows_to_float(*w, 0, rows, wf);
  for (size_t t = 0; t < tokens; ++t) {
    for (size_t r = 0; r < rows; ++r) {
      double abs_sum = 0.0;
      for (size_t i = 0; i < cols; ++i) {
        abs_sum += std::fabs(double{wf[r * cols + i]} * x[t * cols + i]);
      }
      CHECK(std::fabs(y_float[t * rows + r] - y_bf16[t * rows + r]) <= 0x1p-8 * abs_sum);
    }
  }
}

}  // namespace tandem::kernels::testing
