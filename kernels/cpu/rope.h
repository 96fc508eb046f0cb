// Rotary position embedding (RoPE) in the two pair layouts GGUF/HF checkpoints use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tandem::kernels {

// Which elements of a head form a rotated pair (i in [0, rot_dims / 2)):
//  kNormal: (2i, 2i + 1) — ggml's mode 0: llama/Mixtral in GGUF, whose Q/K weights the converter
//           permuted for this layout.
//  kNeox:   (i, i + rot_dims / 2) — ggml's NEOX mode and HF's rotate_half: Qwen2/Qwen3(-MoE),
//           OLMoE, and every HF (safetensors) checkpoint.
enum class RopeLayout { kNormal, kNeox };

struct RopeConfig {
  RopeLayout layout = RopeLayout::kNeox;
  size_t head_dim = 0;
  size_t rot_dims = 0;  // rotated leading dims of each head (even, <= head_dim); the rest pass
  float freq_base = 10000.0f;
};

// Rotates pair i of every head of token t by theta = positions[t] * freq_base^(-2i / rot_dims):
// (a, b) -> (a cos - b sin, a sin + b cos), a the first element of the pair.
// Precision: inv_freq_i = freq_base^(-2i/rot_dims) is computed in double and rounded to float,
// theta = float(pos) * inv_freq_i is rounded to float (as HF and ggml do, so large positions see
// the same angle error they see), and cos/sin of that float angle are computed in double and
// rounded (correctly rounded in practice). The rotation itself is float math.
// x is [n_tokens x n_heads x head_dim] floats, rotated in place; positions holds n_tokens entries.
// Bad shapes or config (odd or zero rot_dims, rot_dims > head_dim) are caller bugs (TANDEM_CHECK).
// Any thread; no shared state.
void rope(std::span<float> x, size_t n_tokens, size_t n_heads, std::span<const int32_t> positions,
          const RopeConfig& config);

}  // namespace tandem::kernels
