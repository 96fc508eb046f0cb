// The AVX-512 + VNNI matmul kernel table: the AVX-512 float path (built with -mavx512vnni on top of
// the AVX-512 flags; called only when cpu_features() reports avx512_vnni). The quantized dot
// products of this variant are the weight-type table's (weight_type_table.cpp): AVX2 kernels until
// a VNNI kernel has been written and has run on a VNNI machine.
#include "kernels/cpu/matmul_x86_avx512_impl.h"

#ifndef __AVX512VNNI__
#error "matmul_avx512_vnni.cpp needs -mavx512vnni"
#endif

namespace tandem::kernels::detail {

const MatmulKernels& matmul_kernels_avx512_vnni() {
  static const MatmulKernels kernels{"avx512-vnni", avx512_to_float, avx512_dot_rows,
                                     avx512_dot_rows_direct};
  return kernels;
}

}  // namespace tandem::kernels::detail
