// The weight-type kernel table: one row per type (reference conversion, activation format, per-ISA
// dot products). Adding a type's fast path: its scalar and SIMD dot files, its row here, its tests.
#include "kernels/cpu/weight_type_table.h"

#include <array>

#include "base/check.h"

#include "kernels/cpu/dequantize_rows.h"

namespace tandem::kernels {
namespace {

using detail::QuantDotFn;
using F = ActivationFormat;

// The x86 SIMD entries; elsewhere every variant falls back to the scalar kernel (the dispatcher
// never selects a SIMD variant there).
#ifdef TANDEM_MATMUL_X86
#define TANDEM_X86(fn) fn
#else
#define TANDEM_X86(fn) nullptr
#endif

// A row of a type with a quantized dot product: scalar, AVX2, AVX-512, AVX-512 VNNI and AMX
// kernels (without an AMX kernel of its own the AMX variant runs the AVX-512 VNNI one).
constexpr WeightTypeKernels quantized(TensorType type,
                                      void (*to_float)(const uint8_t*, float*, size_t), F format,
                                      QuantDotFn scalar, QuantDotFn avx2, QuantDotFn avx512,
                                      QuantDotFn avx512_vnni, QuantDotFn amx = nullptr) {
  return WeightTypeKernels{
      type,
      to_float,
      format,
      {scalar, avx2 ? avx2 : scalar, avx512 ? avx512 : scalar, avx512_vnni ? avx512_vnni : scalar,
       amx ? amx : (avx512_vnni ? avx512_vnni : scalar)}};
}

// `row` with an interleaved layout: its repack and scalar, AVX2, AVX-512, AVX-512 VNNI and AMX
// kernels.
constexpr WeightTypeKernels with_interleaved(WeightTypeKernels row, detail::RepackFn repack,
                                             detail::InterleavedDotFn scalar,
                                             detail::InterleavedDotFn avx2,
                                             detail::InterleavedDotFn avx512,
                                             detail::InterleavedDotFn avx512_vnni,
                                             detail::InterleavedDotFn amx) {
  row.interleaved_x8 = {repack, {scalar, avx2, avx512, avx512_vnni, amx}};
  return row;
}

// `row` with Q8_0's row-quad layout: its repack and scalar, AVX2, AVX-512, AVX-512 VNNI and AMX
// kernels.
constexpr WeightTypeKernels with_row_quads(WeightTypeKernels row, detail::RepackFn repack,
                                           detail::InterleavedDotFn scalar,
                                           detail::InterleavedDotFn avx2,
                                           detail::InterleavedDotFn avx512,
                                           detail::InterleavedDotFn avx512_vnni,
                                           detail::InterleavedDotFn amx) {
  row.row_quads = {repack, {scalar, avx2, avx512, avx512_vnni, amx}};
  return row;
}

constexpr WeightTypeKernels float_only(TensorType type,
                                       void (*to_float)(const uint8_t*, float*, size_t)) {
  return WeightTypeKernels{type, to_float, F::kF32, {nullptr, nullptr, nullptr, nullptr, nullptr}};
}

const std::array kTable = {
    float_only(TensorType::kF32, dequantize_f32),
    float_only(TensorType::kF16, dequantize_f16),
    quantized(TensorType::kBF16, dequantize_bf16, F::kBF16, detail::dot_bf16_scalar,
              TANDEM_X86(detail::dot_bf16_avx2), TANDEM_X86(detail::dot_bf16_avx512),
              TANDEM_X86(detail::dot_bf16_avx512)),
    float_only(TensorType::kF64, dequantize_f64),
    // Q8_0: the row quads on AVX2, where they measured 1.15-1.76x the x8 tiles (a third-
    // generation Zen EPYC), and on AVX-512 VNNI (vpdpbusd per quad; measured on a Zen 4 against
    // its x8 tiles, docs/benchmarks.md); the x8 layout on plain AVX-512 and AMX, whose machines
    // have not run the row-quad kernels.
    with_row_quads(
        with_interleaved(
            quantized(TensorType::kQ8_0, dequantize_q8_0, F::kQ8_0, detail::dot_q8_0_scalar,
                      TANDEM_X86(detail::dot_q8_0_avx2), TANDEM_X86(detail::dot_q8_0_avx2),
                      TANDEM_X86(detail::dot_q8_0_avx512_vnni)),
            detail::repack_q8_0_x8, detail::dot_q8_0_x8_scalar,
            TANDEM_X86(detail::dot_q8_0_x8_avx2), TANDEM_X86(detail::dot_q8_0_x8_avx2),
            TANDEM_X86(detail::dot_q8_0_x8_avx512_vnni),
            TANDEM_X86(detail::dot_q8_0_x8_avx512_vnni)),
        detail::repack_q8_0_quads, detail::dot_q8_0_quads_scalar,
        TANDEM_X86(detail::dot_q8_0_quads_avx2), nullptr,
        TANDEM_X86(detail::dot_q8_0_quads_avx512_vnni), nullptr),
    // Q4_0, Q5_0 and IQ4_NL x8 on AVX2 only: AVX-512 VNNI keeps their plain rows (quant_dot.h).
    with_interleaved(
        quantized(TensorType::kQ4_0, dequantize_q4_0, F::kQ8_0, detail::dot_q4_0_scalar,
                  TANDEM_X86(detail::dot_q4_0_avx2), TANDEM_X86(detail::dot_q4_0_avx2),
                  TANDEM_X86(detail::dot_q4_0_avx512_vnni)),
        detail::repack_q4_0_x8, detail::dot_q4_0_x8_scalar, TANDEM_X86(detail::dot_q4_0_x8_avx2),
        TANDEM_X86(detail::dot_q4_0_x8_avx2), nullptr, nullptr),
    float_only(TensorType::kQ4_1, dequantize_q4_1),
    with_interleaved(
        quantized(TensorType::kQ5_0, dequantize_q5_0, F::kQ8_0, detail::dot_q5_0_scalar,
                  TANDEM_X86(detail::dot_q5_0_avx2), TANDEM_X86(detail::dot_q5_0_avx2),
                  TANDEM_X86(detail::dot_q5_0_avx512_vnni)),
        detail::repack_q5_0_x8, detail::dot_q5_0_x8_scalar, TANDEM_X86(detail::dot_q5_0_x8_avx2),
        TANDEM_X86(detail::dot_q5_0_x8_avx2), nullptr, nullptr),
    float_only(TensorType::kQ5_1, dequantize_q5_1),
    with_interleaved(
        quantized(TensorType::kMXFP4, dequantize_mxfp4, F::kQ8_0, detail::dot_mxfp4_scalar,
                  TANDEM_X86(detail::dot_mxfp4_avx2), TANDEM_X86(detail::dot_mxfp4_avx2),
                  TANDEM_X86(detail::dot_mxfp4_avx512_vnni)),
        detail::repack_mxfp4_x8, detail::dot_mxfp4_x8_scalar, TANDEM_X86(detail::dot_mxfp4_x8_avx2),
        TANDEM_X86(detail::dot_mxfp4_x8_avx2), TANDEM_X86(detail::dot_mxfp4_x8_avx512_vnni),
        TANDEM_X86(detail::dot_mxfp4_x8_amx)),
    quantized(TensorType::kQ2_K, dequantize_q2_k, F::kQ8_K, detail::dot_q2_k_scalar,
              TANDEM_X86(detail::dot_q2_k_avx2), TANDEM_X86(detail::dot_q2_k_avx2),
              TANDEM_X86(detail::dot_q2_k_avx512_vnni)),
    quantized(TensorType::kQ3_K, dequantize_q3_k, F::kQ8_K, detail::dot_q3_k_scalar,
              TANDEM_X86(detail::dot_q3_k_avx2), TANDEM_X86(detail::dot_q3_k_avx2),
              TANDEM_X86(detail::dot_q3_k_avx512_vnni)),
    with_interleaved(
        quantized(TensorType::kQ4_K, dequantize_q4_k, F::kQ8_K, detail::dot_q4_k_scalar,
                  TANDEM_X86(detail::dot_q4_k_avx2), TANDEM_X86(detail::dot_q4_k_avx2),
                  TANDEM_X86(detail::dot_q4_k_avx512_vnni)),
        detail::repack_q4_k_x8, detail::dot_q4_k_x8_scalar, TANDEM_X86(detail::dot_q4_k_x8_avx2),
        TANDEM_X86(detail::dot_q4_k_x8_avx2), TANDEM_X86(detail::dot_q4_k_x8_avx512_vnni),
        TANDEM_X86(detail::dot_q4_k_x8_amx)),
    // Q5_K and Q6_K x8 in every column but AMX's, which keeps the plain rows for its tiles.
    with_interleaved(
        quantized(TensorType::kQ5_K, dequantize_q5_k, F::kQ8_K, detail::dot_q5_k_scalar,
                  TANDEM_X86(detail::dot_q5_k_avx2), TANDEM_X86(detail::dot_q5_k_avx2),
                  TANDEM_X86(detail::dot_q5_k_avx512_vnni), TANDEM_X86(detail::dot_q5_k_amx)),
        detail::repack_q5_k_x8, detail::dot_q5_k_x8_scalar, TANDEM_X86(detail::dot_q5_k_x8_avx2),
        TANDEM_X86(detail::dot_q5_k_x8_avx2), TANDEM_X86(detail::dot_q5_k_x8_avx512_vnni), nullptr),
    with_interleaved(
        quantized(TensorType::kQ6_K, dequantize_q6_k, F::kQ8_K, detail::dot_q6_k_scalar,
                  TANDEM_X86(detail::dot_q6_k_avx2), TANDEM_X86(detail::dot_q6_k_avx2),
                  TANDEM_X86(detail::dot_q6_k_avx512_vnni), TANDEM_X86(detail::dot_q6_k_amx)),
        detail::repack_q6_k_x8, detail::dot_q6_k_x8_scalar, TANDEM_X86(detail::dot_q6_k_x8_avx2),
        TANDEM_X86(detail::dot_q6_k_x8_avx2), TANDEM_X86(detail::dot_q6_k_x8_avx512_vnni), nullptr),
    with_interleaved(
        quantized(TensorType::kIQ4_NL, dequantize_iq4_nl, F::kQ8_0, detail::dot_iq4_nl_scalar,
                  TANDEM_X86(detail::dot_iq4_nl_avx2), TANDEM_X86(detail::dot_iq4_nl_avx2),
                  TANDEM_X86(detail::dot_iq4_nl_avx512_vnni)),
        detail::repack_iq4_nl_x8, detail::dot_iq4_nl_x8_scalar,
        TANDEM_X86(detail::dot_iq4_nl_x8_avx2), TANDEM_X86(detail::dot_iq4_nl_x8_avx2), nullptr,
        nullptr),
    quantized(TensorType::kIQ4_XS, dequantize_iq4_xs, F::kQ8_K, detail::dot_iq4_xs_scalar,
              TANDEM_X86(detail::dot_iq4_xs_avx2), TANDEM_X86(detail::dot_iq4_xs_avx2),
              TANDEM_X86(detail::dot_iq4_xs_avx512_vnni)),
    quantized(TensorType::kIQ1_S, dequantize_iq1_s, F::kQ8_K, detail::dot_iq1_s_scalar,
              TANDEM_X86(detail::dot_iq1_s_avx2), TANDEM_X86(detail::dot_iq1_s_avx2),
              TANDEM_X86(detail::dot_iq1_s_avx512_vnni)),
    quantized(TensorType::kIQ1_M, dequantize_iq1_m, F::kQ8_K, detail::dot_iq1_m_scalar,
              TANDEM_X86(detail::dot_iq1_m_avx2), TANDEM_X86(detail::dot_iq1_m_avx2),
              TANDEM_X86(detail::dot_iq1_m_avx512_vnni)),
    quantized(TensorType::kIQ2_XXS, dequantize_iq2_xxs, F::kQ8_K, detail::dot_iq2_xxs_scalar,
              TANDEM_X86(detail::dot_iq2_xxs_avx2), TANDEM_X86(detail::dot_iq2_xxs_avx2),
              TANDEM_X86(detail::dot_iq2_xxs_avx512_vnni)),
    quantized(TensorType::kIQ2_XS, dequantize_iq2_xs, F::kQ8_K, detail::dot_iq2_xs_scalar,
              TANDEM_X86(detail::dot_iq2_xs_avx2), TANDEM_X86(detail::dot_iq2_xs_avx2),
              TANDEM_X86(detail::dot_iq2_xs_avx512_vnni)),
    quantized(TensorType::kIQ2_S, dequantize_iq2_s, F::kQ8_K, detail::dot_iq2_s_scalar,
              TANDEM_X86(detail::dot_iq2_s_avx2), TANDEM_X86(detail::dot_iq2_s_avx2),
              TANDEM_X86(detail::dot_iq2_s_avx512_vnni)),
    quantized(TensorType::kIQ3_XXS, dequantize_iq3_xxs, F::kQ8_K, detail::dot_iq3_xxs_scalar,
              TANDEM_X86(detail::dot_iq3_xxs_avx2), TANDEM_X86(detail::dot_iq3_xxs_avx2),
              TANDEM_X86(detail::dot_iq3_xxs_avx512_vnni)),
    quantized(TensorType::kIQ3_S, dequantize_iq3_s, F::kQ8_K, detail::dot_iq3_s_scalar,
              TANDEM_X86(detail::dot_iq3_s_avx2), TANDEM_X86(detail::dot_iq3_s_avx2),
              TANDEM_X86(detail::dot_iq3_s_avx512_vnni)),
    quantized(TensorType::kF8_E4M3_B128, dequantize_f8_e4m3_b128, F::kBF16,
              detail::dot_f8_b128_scalar, TANDEM_X86(detail::dot_f8_b128_avx2),
              TANDEM_X86(detail::dot_f8_b128_avx512), TANDEM_X86(detail::dot_f8_b128_avx512)),
};

#undef TANDEM_X86

}  // namespace

std::span<const WeightTypeKernels> weight_type_table() {
  return kTable;
}

const WeightTypeKernels* weight_type_kernels(TensorType type) {
  for (const WeightTypeKernels& row : kTable) {
    if (row.type == type) return &row;
  }
  return nullptr;
}

const InterleavedKernels* interleaved_kernels(const WeightTypeKernels& row, WeightLayout layout) {
  TANDEM_CHECK(layout != WeightLayout::kRows);
  const InterleavedKernels& k =
      layout == WeightLayout::kRowQuads8 ? row.row_quads : row.interleaved_x8;
  return k.repack != nullptr ? &k : nullptr;
}

std::string weight_type_names() {
  std::string names;
  for (const WeightTypeKernels& row : kTable) {
    if (!names.empty()) names += ", ";
    names += tensor_type_name(row.type);
  }
  return names;
}

}  // namespace tandem::kernels
