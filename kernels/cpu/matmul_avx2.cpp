// The AVX2 + FMA + F16C matmul kernel table (built with -mavx2 -mfma -mf16c; called only when
// cpu_features() reports them).
#include "kernels/cpu/matmul_x86_avx2_impl.h"
#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {

// The weight-type table's Q8_0 kernel (quant_dot.h) of this file's instruction set.
void dot_q8_0_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride) {
  avx2_dot_q8_0(w, row_bytes, rows, x, y, y_stride);
}

const MatmulKernels& matmul_kernels_avx2() {
  static const MatmulKernels kernels{
      "avx2", avx2_to_float, avx2_dot_rows, avx2_dot_rows_direct, avx2_q8_0_unpack, avx2_q8_0_rows};
  return kernels;
}

}  // namespace tandem::kernels::detail
