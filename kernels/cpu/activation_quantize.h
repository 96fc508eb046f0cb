// The per-row activation quantizers behind quantize_activations (internal to kernels/cpu): the
// scalar references and their AVX2 forms, bit-identical to them for every input (NaN, infinities
// and zero blocks included).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::kernels::detail {

// One row of cols floats (whole blocks) to Q8_0: per 32-element block d = amax / 127 stored as
// fp16 (and read back), q = round-half-away(x / d) clamped to +-127, NaN to 0; ggml's
// quantize_row_q8_0_ref.
void quantize_row_q8_0_scalar(const float* x, size_t cols, int8_t* qs, float* d);
// One row to Q8_K: per 256-element block the element of largest magnitude (the first of equals)
// gives iscale = -127 / max, q = nearbyint(iscale * x) clamped to [-128, 127], d = 1 / iscale and
// the sums of each 16 quants; an all-zero or non-finite block is zeros; ggml's
// quantize_row_q8_K_ref.
void quantize_row_q8_k_scalar(const float* x, size_t cols, int8_t* qs, float* d, int16_t* bsums);

// AVX2 (+F16C) forms; callable only when cpu_features() reports them.
void quantize_row_q8_0_avx2(const float* x, size_t cols, int8_t* qs, float* d);
void quantize_row_q8_k_avx2(const float* x, size_t cols, int8_t* qs, float* d, int16_t* bsums);

}  // namespace tandem::kernels::detail
