// Scalar dequantize routines for ggml's grid i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S): each block decoded by iq_blocks.h (which holds the layouts), then scaled with
// ggml's float operations in ggml's order, per group l of 8 values v with scale code s:
//   IQ2_*:   y = (d * (0.5f + s) * 0.25f) * v
//   IQ3_XXS: y = (d * (0.5f + s) * 0.5f) * v
//   IQ3_S:   y = (d * (2s + 1)) * v
//   IQ1_*:   y = (d * (2s + 1)) * (v + delta), delta = +-kIq1Delta
// (ggml multiplies by the grid value and then by +-1; the product with the signed value rounds
// the same). The build disables FMA contraction for this file.
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/dequantize_rows.h"
#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/iq_blocks.h"

namespace tandem::kernels {

namespace {

constexpr size_t kSuper = 256;

using detail::IqScaleRule;

float group_scale(IqScaleRule rule, float d, int s) {
  switch (rule) {
    case IqScaleRule::kQuarter:
      return d * (0.5f + static_cast<float>(s)) * 0.25f;
    case IqScaleRule::kHalf:
      return d * (0.5f + static_cast<float>(s)) * 0.5f;
    case IqScaleRule::kOdd:
    case IqScaleRule::kOddDelta:
      return d * static_cast<float>(2 * s + 1);
  }
  return 0.0f;
}

void dequantize_iq(const detail::IqBlockType& type, const uint8_t* src, float* dst, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, src += type.block_bytes, dst += kSuper) {
    const float d = fp16_to_fp32(type.d_bits(src));
    for (size_t ib = 0; ib < 8; ++ib) {
      detail::IqSubBlock sub;
      type.decode(src, ib, sub);
      for (size_t l = 0; l < 4; ++l) {
        const float scale = group_scale(type.rule, d, sub.s[l]);
        const int8_t* v = sub.v + 8 * l;
        float* y = dst + 32 * ib + 8 * l;
        if (type.rule == IqScaleRule::kOddDelta) {
          const float delta = sub.delta[l] < 0 ? -detail::kIq1Delta : detail::kIq1Delta;
          for (size_t j = 0; j < 8; ++j) y[j] = scale * (static_cast<float>(v[j]) + delta);
        } else {
          for (size_t j = 0; j < 8; ++j) y[j] = scale * static_cast<float>(v[j]);
        }
      }
    }
  }
}

}  // namespace

void dequantize_iq2_xxs(const uint8_t* src, float* dst, size_t blocks) {
  dequantize_iq(detail::kIq2XxsBlocks, src, dst, blocks);
}

void dequantize_iq2_xs(const uint8_t* src, float* dst, size_t blocks) {
  dequantize_iq(detail::kIq2XsBlocks, src, dst, blocks);
}

void dequantize_iq2_s(const uint8_t* src, float* dst, size_t blocks) {
  dequantize_iq(detail::kIq2SBlocks, src, dst, blocks);
}

void dequantize_iq3_xxs(const uint8_t* src, float* dst, size_t blocks) {
  dequantize_iq(detail::kIq3XxsBlocks, src, dst, blocks);
}

void dequantize_iq3_s(const uint8_t* src, float* dst, size_t blocks) {
  dequantize_iq(detail::kIq3SBlocks, src, dst, blocks);
}

void dequantize_iq1_s(const uint8_t* src, float* dst, size_t blocks) {
  dequantize_iq(detail::kIq1SBlocks, src, dst, blocks);
}

void dequantize_iq1_m(const uint8_t* src, float* dst, size_t blocks) {
  dequantize_iq(detail::kIq1MBlocks, src, dst, blocks);
}

}  // namespace tandem::kernels
