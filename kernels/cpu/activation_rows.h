// Activation rows in the formats weight types pair with in the quantized dot products (F32, Q8_0,
// Q8_K, BF16): the owning QuantizedActivations, its plain view ActivationRows, and the quantizers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace tandem::kernels {

// The activation format a weight type's dot product consumes (weight_type_table.h says which).
//  kF32:  plain float rows.
//  kQ8_0: 32-element blocks: int8 quants and one scale per block (an fp16 value, held as float),
//         ggml's block_q8_0 (quantize_row_q8_0_ref's rounding).
//  kQ8_K: 256-element super-blocks: int8 quants, one float scale, and the sums of each 16
//         consecutive quants (int16), ggml's block_q8_K (quantize_row_q8_K_ref's rounding).
//  kBF16: plain rows of bfloat16 values (float32 rounded to nearest even; NaN kept, quieted), what
//         BF16 weights meet in the quantized mode (as ggml's vec_dot_bf16 takes them).
enum class ActivationFormat : uint8_t { kF32, kQ8_0, kQ8_K, kBF16 };

inline constexpr size_t kQ8_0BlockElements = 32;
inline constexpr size_t kQ8_0BlockBytes = 34;  // fp16 scale d, then 32 int8 quants
inline constexpr size_t kQ8_KBlockElements = 256;
inline constexpr size_t kQ8_KSumElements = 16;  // quants per bsums entry

std::string_view activation_format_name(ActivationFormat f);

// Elements per scale of a format (1 for kF32, 32, 256).
size_t activation_block_elements(ActivationFormat f);

// A read-only view of n_tokens activation rows of `cols` elements, row-major. A plain struct (no
// member functions) so that the SIMD kernel files can take it without sharing inline code.
//  kF32:  f32 holds n_tokens * cols floats; the other pointers are null.
//  kQ8_0: qs holds n_tokens * cols int8, d n_tokens * cols / 32 scales; bsums is null.
//  kQ8_K: qs as kQ8_0, d n_tokens * cols / 256 scales, bsums n_tokens * cols / 16 sums.
//  kBF16: bf16 holds n_tokens * cols bfloat16 bit patterns; the other pointers are null.
// Row t starts at f32 + t * cols, qs + t * cols, d + t * cols / block, bsums + t * cols / 16,
// bf16 + t * cols.
// The viewed buffers belong to whoever made the view and must outlive it.
struct ActivationRows {
  ActivationFormat format = ActivationFormat::kF32;
  size_t n_tokens = 0;
  size_t cols = 0;
  const float* f32 = nullptr;
  const int8_t* qs = nullptr;
  const float* d = nullptr;
  const int16_t* bsums = nullptr;
  const uint16_t* bf16 = nullptr;
};

// Owning storage of activation rows in one format. Reused across calls (vectors only grow); owned
// by one thread at a time, read-only while kernels on other threads read a view of it.
struct QuantizedActivations {
  ActivationFormat format = ActivationFormat::kF32;
  size_t n_tokens = 0;
  size_t cols = 0;
  std::vector<float> f32;
  std::vector<int8_t> qs;
  std::vector<float> d;
  std::vector<int16_t> bsums;
  std::vector<uint16_t> bf16;
};

// The view of all rows, or of rows [t0, t1) (checked).
ActivationRows view_of(const QuantizedActivations& a);
ActivationRows view_of(const QuantizedActivations& a, size_t t0, size_t t1);

// Rows [t0, t1) of a view (checked).
ActivationRows row_range(const ActivationRows& a, size_t t0, size_t t1);

// Quantizes (or, for kF32, copies) x — n_tokens rows of cols floats — into out in format f. cols
// must be a whole number of the format's blocks (checked). Q8_0 as ggml's quantize_row_q8_0_ref
// (d = amax / 127, q = roundf(x / d), scale stored as fp16); Q8_K as quantize_row_q8_K_ref (the
// element of largest magnitude, with its sign, maps to -127: iscale = -127 / max, q =
// min(127, nearest_int(iscale * x)) rounding ties to even, d = 1 / iscale; bsums = sums of 16).
// An all-zero block gets d = 0 and zero quants; NaN inputs give quants of 0. Any thread.
void quantize_activations(ActivationFormat f, std::span<const float> x, size_t n_tokens,
                          size_t cols, QuantizedActivations& out);

// Rows [t0, t1) of x quantized into rows [t0, t1) of out, which quantize_activations_resize has
// shaped: for splitting one quantization over threads (disjoint row ranges may run at once).
void quantize_activations_resize(ActivationFormat f, size_t n_tokens, size_t cols,
                                 QuantizedActivations& out);
void quantize_activation_rows(std::span<const float> x, size_t t0, size_t t1,
                              QuantizedActivations& out);

// Copies row `src_row` of src into row `dst_row` of dst (same format and cols; dst shaped by
// quantize_activations_resize): gathers the rows of the tokens routed to one expert.
void copy_activation_row(const QuantizedActivations& src, size_t src_row, QuantizedActivations& dst,
                         size_t dst_row);

// The float -> fp16 bit pattern (round to nearest even; overflow to inf; NaN kept).
uint16_t fp32_to_fp16_bits(float f);

// The float -> bfloat16 bit pattern: round to nearest even (subnormals kept, overflow to inf), a
// NaN keeps its sign and top payload bits and is made quiet (ggml's GGML_FP32_TO_BF16).
constexpr uint16_t fp32_to_bf16_bits(uint32_t f32_bits) {
  if ((f32_bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f32_bits >> 16) | 64u);
  return static_cast<uint16_t>((f32_bits + (0x7fffu + ((f32_bits >> 16) & 1u))) >> 16);
}

}  // namespace tandem::kernels
