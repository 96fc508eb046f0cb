// Q8_0 activation quantization and float -> fp16 rounding.
#include "kernels/cpu/quantize_q8_0.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "engine/base/check.h"
#include "kernels/cpu/float_convert.h"

namespace tandem::kernels {

uint16_t fp32_to_fp16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  // 65520 (0x477ff000) is half-way between the largest half 65504 and 65536: ties to even -> inf.
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (ax < 0x38800000u) {
    // Below the smallest normal half (2^-14): a multiple of 2^-24. Scaling by 2^24 is exact and
    // nearbyint rounds ties to even in the default rounding mode; 1024 yields the smallest normal.
    const float scaled = std::bit_cast<float>(ax) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  // Normal: re-bias the exponent (127 -> 15) and round the 13 dropped mantissa bits to even; a
  // carry out of the mantissa correctly bumps the exponent.
  const uint32_t rebased = ax - 0x38000000u;
  return static_cast<uint16_t>(sign | ((rebased + 0xfffu + ((ax >> 13) & 1u)) >> 13));
}

void quantize_q8_0_activations(std::span<const float> x, size_t n_tokens, size_t cols,
                               Q8_0Activations& out) {
  TANDEM_CHECK(cols % kQ8_0BlockElements == 0);
  TANDEM_CHECK(x.size() == n_tokens * cols);
  const size_t blocks = x.size() / kQ8_0BlockElements;
  out.n_tokens = n_tokens;
  out.cols = cols;
  out.qs.resize(x.size());
  out.d.resize(blocks);
  for (size_t b = 0; b < blocks; ++b) {
    const float* src = x.data() + b * kQ8_0BlockElements;
    int8_t* q = out.qs.data() + b * kQ8_0BlockElements;
    float amax = 0.0f;
    for (size_t j = 0; j < kQ8_0BlockElements; ++j) amax = std::fmax(amax, std::fabs(src[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (size_t j = 0; j < kQ8_0BlockElements; ++j) {
      // |src * id| <= 127 up to rounding; NaN (from NaN or infinite input) becomes 0 rather than
      // an undefined conversion.
      const float r = std::round(src[j] * id);
      q[j] = static_cast<int8_t>(std::isnan(r) ? 0.0f : std::clamp(r, -127.0f, 127.0f));
    }
    out.d[b] = fp16_to_fp32(fp32_to_fp16_bits(d));
  }
}

}  // namespace tandem::kernels
