// The per-weight-type kernel table (the shape of ggml's type_traits_cpu): for every weight type
// the CPU computes with, its reference conversion to float, the activation format it pairs with in
// the quantized path, and its dot-product kernel per instruction-set variant. Every "supported
// types" check and message derives from this one table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/matmul_dispatch.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/weight_matrix.h"
#include "kernels/tensor_type.h"

namespace tandem::kernels {

inline constexpr size_t kMatmulVariantCount = kMatmulVariants.size();  // indices of `dot`

// One interleaved layout of a type (weight_matrix.h, quant_dot.h): the repack of plain rows into
// it, and its dot product per MatmulVariant. Where the layout exists the repack and the scalar
// entry are set; a SIMD entry is null where that variant has no kernel on this layout (matmul_rows
// then runs the scalar one on a matrix already in it).
struct InterleavedKernels {
  detail::RepackFn repack = nullptr;
  detail::InterleavedDotFn dot[kMatmulVariantCount] = {};
};

struct WeightTypeKernels {
  TensorType type;
  // The scalar reference conversion of `blocks` whole blocks to float (dequantize()'s routine:
  // ggml's reference order, bit-equal to gguf-py).
  void (*to_float)(const uint8_t* src, float* dst, size_t blocks);
  // The activation format of the quantized path (MatmulActivations::kQuantized); kF32 for types
  // that always compute in float (the weights converted exactly, then float dot products).
  ActivationFormat activations;
  // The dot-product kernel per MatmulVariant (index = the enum's value); null when `activations`
  // is kF32. A SIMD entry may repeat a narrower variant's kernel (an AVX-512 CPU runs AVX2 code)
  // where no wider kernel has been written and run yet.
  detail::QuantDotFn dot[kMatmulVariantCount];
  // The type's interleaved layouts: the x8 layout (WeightLayout::kInterleaved8) and Q8_0's
  // row-quad one (WeightLayout::kRowQuads8); repack null where the type has none. A variant with a
  // SIMD kernel on the row-quad layout computes there; otherwise on the x8 layout where it has
  // one there; otherwise on the rows (preferred_weight_layout, matmul.h).
  InterleavedKernels interleaved_x8 = {};
  InterleavedKernels row_quads = {};
};

// The whole table, in display order.
std::span<const WeightTypeKernels> weight_type_table();

// The row of `type`, or nullptr when the CPU kernels do not compute with it.
const WeightTypeKernels* weight_type_kernels(TensorType type);

// row's kernels of an interleaved layout (kInterleaved8 or kRowQuads8; kRows is a caller's bug),
// or nullptr when the type does not have that layout.
const InterleavedKernels* interleaved_kernels(const WeightTypeKernels& row, WeightLayout layout);

// "f32, f16, bf16, ..." — the types of the table, for error messages and docs.
std::string weight_type_names();

}  // namespace tandem::kernels
