// The AVX-512 (F + BW + VL) matmul kernel table (built with those -m flags plus the AVX2 set;
// called only when cpu_features() reports them).
#include "kernels/cpu/matmul_x86_avx512_impl.h"

namespace tandem::kernels::detail {

const MatmulKernels& matmul_kernels_avx512() {
  static const MatmulKernels kernels{"avx512", avx512_to_float, avx512_dot_rows,
                                     avx512_dot_rows_direct};
  return kernels;
}

}  // namespace tandem::kernels::detail
