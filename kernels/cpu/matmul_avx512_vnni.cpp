// The AVX-512 + VNNI matmul kernel table: the AVX-512 float path, and the int8 path on vpdpbusd
// (built with -mavx512vnni on top of the AVX-512 flags; called only when cpu_features() reports
// avx512_vnni).
#include "kernels/cpu/matmul_x86_avx512_impl.h"
#include "kernels/cpu/quant_dot.h"

#ifndef __AVX512VNNI__
#error "matmul_avx512_vnni.cpp needs -mavx512vnni"
#endif

namespace tandem::kernels::detail {

// The weight-type table's Q8_0 kernel (quant_dot.h) of this file's instruction set.
void dot_q8_0_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride) {
  avx2_dot_q8_0(w, row_bytes, rows, x, y, y_stride);
}

const MatmulKernels& matmul_kernels_avx512_vnni() {
  static const MatmulKernels kernels{"avx512-vnni",          avx512_to_float,  avx512_dot_rows,
                                     avx512_dot_rows_direct, avx2_q8_0_unpack, avx2_q8_0_rows};
  return kernels;
}

}  // namespace tandem::kernels::detail
