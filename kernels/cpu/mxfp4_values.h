// MXFP4 (OCP microscaling FP4) facts the scalar kernels share: the E2M1 code points doubled, and
// the E8M0 block scale halved, so value = kMxfp4Values[code] * e8m0_half(e) (ggml's convention).
// Scalar code only: the SIMD files keep their own constants (they share nothing inline).
#pragma once

#include <bit>
#include <cstdint>

namespace tandem::kernels::detail {

// The E2M1 code points doubled (so they are integers): index = the 4-bit code.
inline constexpr int kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128) as a float, exact for every e: e >= 2 is a normal float with biased exponent e - 1;
// e = 1 and e = 0 are the subnormals 2^-127 and 2^-128 (as bit patterns, so no rounding or flush
// can change them). e = 255 gives 2^127 (the E8M0 NaN code is not special-cased, as in ggml).
inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

}  // namespace tandem::kernels::detail
