// MatmulKernels: the per-ISA primitives behind matmul (internal to kernels/cpu; tests and benches
// select a variant through matmul_dispatch.h instead).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/tensor_type.h"

namespace tandem::kernels::detail {

// One table per instruction set. Every entry is a pure function of its arguments on caller-owned
// buffers (any thread). The entries of a SIMD table may only be called when cpu_features() reports
// that set (the dispatcher guarantees it). The ISA files define everything in anonymous
// namespaces and use no inline functions or templates shared with other files, so no instruction of
// theirs can leak into code that runs on a plain x86-64 CPU through the linker's choice of an
// inline copy.
struct MatmulKernels {
  const char* name;

  // Converts n elements of `type` at src (its block layout, any alignment; n a whole number of
  // blocks) to float at dst, bit-equal to dequantize(). Returns false, touching nothing, for a
  // type this table does not convert (the caller falls back to the scalar dequantize()).
  bool (*to_float)(TensorType type, const uint8_t* src, size_t n, float* dst);

  // y[t * y_stride + r] = dot(x + t * cols, w + r * cols) for t < n_tokens, r < rows: activation
  // rows against `rows` contiguous float weight rows. Each element depends only on its own x row
  // and weight row (never on rows, n_tokens, the element's position within the call, or pointer
  // alignment), so any split of the rows or tokens gives bit-identical results.
  void (*dot_rows)(const float* x, size_t n_tokens, const float* w, size_t rows, size_t cols,
                   float* y, size_t y_stride);

  // dot_rows on weights of `type` read in place (row r at w + r * row_bytes), converted in
  // registers exactly as to_float converts them: for a few tokens, where a converted tile is not
  // reused enough to pay for itself. Bit-identical to to_float followed by dot_rows. Returns
  // false, touching nothing, for a type this table does not read in place.
  bool (*dot_rows_direct)(TensorType type, const uint8_t* w, size_t row_bytes, const float* x,
                          size_t n_tokens, size_t rows, size_t cols, float* y, size_t y_stride);
};

// The table of the active variant (matmul_dispatch.h); any thread.
const MatmulKernels& active_matmul_kernels();

const MatmulKernels& matmul_kernels_scalar();
// Defined only on x86-64 builds (matmul_avx2.cpp, matmul_avx512.cpp).
const MatmulKernels& matmul_kernels_avx2();
const MatmulKernels& matmul_kernels_avx512();
const MatmulKernels& matmul_kernels_avx512_vnni();

}  // namespace tandem::kernels::detail
