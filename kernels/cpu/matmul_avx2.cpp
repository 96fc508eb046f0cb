// The AVX2 + FMA + F16C matmul kernel table (built with -mavx2 -mfma -mf16c; called only when
// cpu_features() reports them).
#include "kernels/cpu/matmul_x86_avx2_impl.h"

namespace tandem::kernels::detail {

const MatmulKernels& matmul_kernels_avx2() {
  static const MatmulKernels kernels{"avx2", avx2_to_float, avx2_dot_rows, avx2_dot_rows_direct};
  return kernels;
}

}  // namespace tandem::kernels::detail
