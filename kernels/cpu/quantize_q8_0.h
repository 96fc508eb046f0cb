// Q8_0 quantization of float activation rows (llama.cpp's reference rounding) for the int8
// matmul path, and float -> fp16 rounding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tandem::kernels {

inline constexpr size_t kQ8_0BlockElements = 32;
inline constexpr size_t kQ8_0BlockBytes = 34;  // fp16 scale d, then 32 int8 quants

// The fp16 bit pattern nearest to f (round to nearest, ties to even; overflow to +-inf; NaN stays
// NaN with its sign). Pure function; any thread.
uint16_t fp32_to_fp16_bits(float f);

// Activation rows quantized to Q8_0 blocks, kept unpacked for the dot kernels: qs holds
// n_tokens * cols int8 quants (row-major), d one scale per 32-element block (n_tokens * cols / 32
// floats, each exactly an fp16 value, i.e. the stored scale already converted back to float).
// Owned by the caller, reused across calls to avoid allocation; read-only while matmul threads
// use it.
struct Q8_0Activations {
  size_t n_tokens = 0;
  size_t cols = 0;
  std::vector<int8_t> qs;
  std::vector<float> d;
};

// Quantizes x (n_tokens rows of cols floats; cols a multiple of 32, checked) into out the way
// ggml's quantize_row_q8_0_ref and gguf-py's Q8_0 do: per block amax = max |x|, d = amax / 127,
// q = roundf(x / d) (ties away from zero, computed as x * (1 / d)), stored scale fp16(d); an
// all-zero block gets d = 0 and zero quants. Any thread (out is the caller's).
void quantize_q8_0_activations(std::span<const float> x, size_t n_tokens, size_t cols,
                               Q8_0Activations& out);

}  // namespace tandem::kernels
