// Element-wise and row kernels: dot, softmax, sigmoid, silu_mul, add, scale, add_scaled.
#pragma once

#include <cstddef>
#include <optional>
#include <span>

namespace tandem::kernels {

// Every function here works on caller-owned buffers: any thread, no shared state. Output spans must
// have the input's size (TANDEM_CHECK); unless stated otherwise, an output may be the same buffer
// as an input (in place) but must not partly overlap it.

// Dot product of n floats with 8 independent partial sums combined pairwise at the end.
// Error bound <= n * 2^-24 * sum |a_i * b_i|.
float dot_f32(const float* a, const float* b, size_t n);

// softmax, sigmoid, silu_mul and swiglu_oai_mul use exp_rows.h's exp (< 1 ulp, not glibc's) and run
// its AVX2 or AVX-512 variant where the CPU has it and the matmul variant (matmul_dispatch.h) is
// not the scalar reference; every variant gives the same bits.

// Stable softmax of one row, in place: subtracts the max of the row (and of the sink, when there
// is one), exponentiates in float, sums in double (exp_rows.h's fixed order), multiplies by the
// float reciprocal of the sum. With a sink, that extra logit joins the max and the denominator but
// gets no output weight (attention sinks). A row whose entries are all -inf, without a sink,
// yields NaN (as torch does); the row must not be empty.
void softmax(std::span<float> row, std::optional<float> sink = std::nullopt);

// out = 1 / (1 + exp(-x)), element-wise.
void sigmoid(std::span<const float> x, std::span<float> out);

// out = silu(gate) * up = gate / (1 + exp(-gate)) * up, element-wise (the SwiGLU expert MLP).
void silu_mul(std::span<const float> gate, std::span<const float> up, std::span<float> out);

// GPT-OSS's clamped SwiGLU, element-wise: g = min(gate, limit), u = clamp(up, -limit, limit),
// out = g / (1 + exp(-alpha g)) * (u + 1), in float (ggml's swiglu_oai; the models use alpha
// 1.702 and limit 7).
inline constexpr float kSwiGluOaiAlpha = 1.702f;
inline constexpr float kSwiGluOaiLimit = 7.0f;
void swiglu_oai_mul(std::span<const float> gate, std::span<const float> up, std::span<float> out,
                    float alpha = kSwiGluOaiAlpha, float limit = kSwiGluOaiLimit);

// out = a + b, element-wise (residual connections).
void add(std::span<const float> a, std::span<const float> b, std::span<float> out);

// x *= s, in place.
void scale(std::span<float> x, float s);

// acc += s * x, element-wise (the weighted sum of expert outputs). acc and x must not overlap.
void add_scaled(std::span<float> acc, std::span<const float> x, float s);

}  // namespace tandem::kernels
