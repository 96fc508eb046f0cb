// The AVX-512 + VNNI matmul kernel table: the AVX-512 float path, and the int8 path on vpdpbusd
// (built with -mavx512vnni on top of the AVX-512 flags; called only when cpu_features() reports
// avx512_vnni).
#include "kernels/cpu/matmul_x86_avx512_impl.h"

#ifndef __AVX512VNNI__
#error "matmul_avx512_vnni.cpp needs -mavx512vnni"
#endif

namespace tandem::kernels::detail {

const MatmulKernels& matmul_kernels_avx512_vnni() {
  static const MatmulKernels kernels{"avx512-vnni",          avx512_to_float,  avx512_dot_rows,
                                     avx512_dot_rows_direct, avx2_q8_0_unpack, avx2_q8_0_rows,
                                     avx2_q8_0_rows_direct};
  return kernels;
}

}  // namespace tandem::kernels::detail
