// Rotary position embedding (RoPE) in the two pair layouts GGUF/HF checkpoints use, with linear
// and YaRN context scaling.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tandem::kernels {

// Which elements of a head form a rotated pair (i in [0, rot_dims / 2)):
//  kNormal: (2i, 2i + 1) — ggml's mode 0: llama/Mixtral in GGUF, whose Q/K weights the converter
//           permuted for this layout.
//  kNeox:   (i, i + rot_dims / 2) — ggml's NEOX mode and HF's rotate_half: Qwen2/Qwen3(-MoE),
//           OLMoE, GPT-OSS, and every HF (safetensors) checkpoint.
enum class RopeLayout { kNormal, kNeox };

struct RopeConfig {
  RopeLayout layout = RopeLayout::kNeox;
  size_t head_dim = 0;
  size_t rot_dims = 0;  // rotated leading dims of each head (even, <= head_dim); the rest pass
  float freq_base = 10000.0f;
  // YaRN, with ggml_rope_ext's semantics (llama.cpp): theta_interp = freq_scale * theta_extrap;
  // when ext_factor != 0, theta = theta_interp * (1 - ramp) + theta_extrap * ramp with ramp =
  // ext_factor * rope_yarn_ramp(corr_low, corr_high, i) and cos/sin are multiplied by
  // attn_factor * (1 + 0.1 ln(1 / freq_scale)); otherwise by attn_factor alone.
  float freq_scale = 1.0f;   // 1 / scaling factor
  float ext_factor = 0.0f;   // 0: no YaRN ramp (plain or linear-scaled RoPE); 1: YaRN
  float attn_factor = 1.0f;  // multiplies cos and sin (the "mscale" a model may ask for)
  size_t n_ctx_orig = 0;     // original training context (YaRN's correction range)
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  // Whether YaRN's correction range is rounded outwards to whole pair indices (ggml always;
  // transformers' rope_scaling "truncate", default true) or kept fractional (transformers with
  // "truncate": false, as gpt-oss's config.json asks). See rope_yarn_corr_dims.
  bool yarn_round_corr_dims = true;
};

// YaRN's correction range in pair indices: with
// corr_dim(beta) = rot_dims * ln(n_ctx_orig / (beta * 2 pi)) / (2 ln(freq_base)),
//   round = true  (ggml_rope_yarn_corr_dims; transformers' find_correction_range, truncate true):
//     low = max(0, floor(corr_dim(beta_fast))), high = min(rot_dims - 1, ceil(corr_dim(beta_slow)))
//     -- both whole numbers;
//   round = false (transformers with truncate false):
//     low = max(0, corr_dim(beta_fast)),        high = min(rot_dims - 1, corr_dim(beta_slow)).
// Evaluated in double, rounded to float at the end (ggml uses float throughout; the two agree
// unless corr_dim lies within float rounding of an integer).
struct RopeYarnCorrDims {
  float low = 0.0f;
  float high = 0.0f;
};

// Requires rot_dims > 0, n_ctx_orig > 0, freq_base > 1 and betas > 0 (TANDEM_CHECK: the model
// loader validates these before they get here). Pure; any thread.
RopeYarnCorrDims rope_yarn_corr_dims(size_t rot_dims, size_t n_ctx_orig, float freq_base,
                                     float beta_fast, float beta_slow, bool round = true);

// Rotates pair i of every head of token t by angle theta_{t,i}, scaled by mscale:
// (a, b) -> (a c - b s, a s + b c), a the first element of the pair, c = mscale cos(theta),
// s = mscale sin(theta). Exactly what is computed, per pair i (once per call) and token t:
//   inv_freq_i = float(freq_base^(-2i / rot_dims))            pow in double, rounded
//   theta_e    = float(positions[t]) * inv_freq_i             float
//   theta_i    = freq_scale * theta_e                          float
//   ext_factor == 0:  theta = theta_i;   mscale = attn_factor
//   ext_factor != 0:  mix_i = ext_factor * ramp_i              float, with
//                       ramp_i = 1 - min(1, max(0, (i - low) / max(0.001, high - low)))  float,
//                       (low, high) = rope_yarn_corr_dims(rot_dims, n_ctx_orig, freq_base,
//                       beta_fast, beta_slow, yarn_round_corr_dims)
//                     theta = theta_i * (1 - mix_i) + theta_e * mix_i                    float
//                     mscale = attn_factor * (1 + 0.1 ln(1 / freq_scale))               double
//   c, s = float(cos(double(theta)) * mscale), float(sin(double(theta)) * mscale)
// The angle is float math in ggml's order (as HF and ggml round it, so large positions see the
// same angle error they see); cos/sin are evaluated in double and rounded once (correctly rounded
// in practice); the rotation itself is float math. With the defaults (freq_scale 1, ext_factor 0,
// attn_factor 1) this is plain RoPE: theta = theta_e and mscale = 1 exactly.
// x is [n_tokens x n_heads x head_dim] floats, rotated in place; positions holds n_tokens entries.
// Bad shapes or config (odd or zero rot_dims, rot_dims > head_dim, freq_scale <= 0, or with
// ext_factor != 0 what rope_yarn_corr_dims requires) are caller bugs (TANDEM_CHECK).
// Scratch is thread-local (O(rot_dims) floats, reused across calls). Any thread; no shared state.
void rope(std::span<float> x, size_t n_tokens, size_t n_heads, std::span<const int32_t> positions,
          const RopeConfig& config);

}  // namespace tandem::kernels
