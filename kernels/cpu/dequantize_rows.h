// Per-type scalar dequantize routines behind dequantize(); unchecked, for kernels that size their
// own buffers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::kernels {

// Each routine converts `blocks` whole blocks of its type read from src (the type's block layout,
// little-endian, any alignment) into blocks * block_elements floats at dst. No checks: the caller
// guarantees src holds blocks * block_bytes bytes and dst room for the floats, without overlap.
// Pure functions; any thread.

// Plain types (block of 1 element).
void dequantize_f32(const uint8_t* src, float* dst, size_t blocks);
void dequantize_f16(const uint8_t* src, float* dst, size_t blocks);
void dequantize_bf16(const uint8_t* src, float* dst, size_t blocks);
void dequantize_f64(const uint8_t* src, float* dst, size_t blocks);  // rounds to nearest even

// Legacy 32-element quants (dequantize_legacy.cpp).
void dequantize_q4_0(const uint8_t* src, float* dst, size_t blocks);
void dequantize_q4_1(const uint8_t* src, float* dst, size_t blocks);
void dequantize_q5_0(const uint8_t* src, float* dst, size_t blocks);
void dequantize_q5_1(const uint8_t* src, float* dst, size_t blocks);
void dequantize_q8_0(const uint8_t* src, float* dst, size_t blocks);
void dequantize_mxfp4(const uint8_t* src, float* dst, size_t blocks);
void dequantize_iq4_nl(const uint8_t* src, float* dst, size_t blocks);

// K-quants, 256-element super-blocks (dequantize_kquants.cpp).
void dequantize_q2_k(const uint8_t* src, float* dst, size_t blocks);
void dequantize_q3_k(const uint8_t* src, float* dst, size_t blocks);
void dequantize_q4_k(const uint8_t* src, float* dst, size_t blocks);
void dequantize_q5_k(const uint8_t* src, float* dst, size_t blocks);
void dequantize_q6_k(const uint8_t* src, float* dst, size_t blocks);
void dequantize_iq4_xs(const uint8_t* src, float* dst, size_t blocks);

// Grid i-quants, 256-element super-blocks (dequantize_iquants.cpp).
void dequantize_iq1_s(const uint8_t* src, float* dst, size_t blocks);
void dequantize_iq1_m(const uint8_t* src, float* dst, size_t blocks);
void dequantize_iq2_xxs(const uint8_t* src, float* dst, size_t blocks);
void dequantize_iq2_xs(const uint8_t* src, float* dst, size_t blocks);
void dequantize_iq2_s(const uint8_t* src, float* dst, size_t blocks);
void dequantize_iq3_xxs(const uint8_t* src, float* dst, size_t blocks);
void dequantize_iq3_s(const uint8_t* src, float* dst, size_t blocks);

// Tandem's FP8 layout (TensorType::kF8_E4M3_B128: a float32 scale, then 128 E4M3 codes; element =
// fp8_e4m3_to_fp32(code) * scale, one rounding) (dequantize_fp8.cpp).
void dequantize_f8_e4m3_b128(const uint8_t* src, float* dst, size_t blocks);

}  // namespace tandem::kernels
