// RMSNorm over rows, and the per-head variant used for Qwen3's Q/K norm.
#pragma once

#include <cstddef>
#include <span>

namespace tandem::kernels {

// For each of n_rows rows of dim floats: out = (x * (1 / sqrt(mean(x^2) + eps))) * weight.
// The sum of squares accumulates in double (as ggml does), the scale is computed and applied in
// float, then the weight is multiplied in a second rounding step (ggml's rms_norm followed by
// mul; HF's `weight * (x * rsqrt(var + eps))` rounds the same way in float32).
// x and out hold n_rows * dim floats and may be the same buffer (in place); weight holds dim
// floats. Mismatched sizes are caller bugs (TANDEM_CHECK). Any thread; no shared state.
void rms_norm(std::span<const float> x, std::span<const float> weight, float eps, size_t n_rows,
              size_t dim, std::span<float> out);

// Per-head norm: x is [n_tokens x n_heads x head_dim]; each head_dim slice is normalized on its
// own with the shared head_dim weight (Qwen3 q_norm/k_norm, OLMoE applies its Q/K norm over the
// whole projection instead: use rms_norm with dim = n_heads * head_dim there). In place allowed.
void rms_norm_heads(std::span<const float> x, std::span<const float> weight, float eps,
                    size_t n_tokens, size_t n_heads, size_t head_dim, std::span<float> out);

}  // namespace tandem::kernels
