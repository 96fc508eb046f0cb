// IQ4_NL / IQ4_XS facts the scalar kernels share: the 16 non-linear int8 values a 4-bit code
// stands for (ggml's kvalues_iq4nl), and IQ4_XS's 6-bit sub-block scales.
// Scalar code only: the SIMD files keep their own constants (they share nothing inline).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::kernels::detail {

// Index = the 4-bit code; value = the weight in units of the block scale.
inline constexpr int kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                       1,    13,   25,  38,  53,  69,  89,  113};

// IQ4_XS super-block (136 bytes): f16 d; uint16 scales_h; uint8 scales_l[4]; uint8 qs[128].
inline constexpr size_t kIq4XsBytes = 136;

// The signed scale (ls - 32, in -32..31) of 32-element sub-block j (0..7) of the IQ4_XS
// super-block at `block`: ls = (nibble j of scales_l, low nibble first) | (bits 2j..2j+1 of
// scales_h) << 4.
inline int iq4_xs_scale(const uint8_t* block, int j) {
  const unsigned scales_h = static_cast<unsigned>(block[2]) | static_cast<unsigned>(block[3]) << 8;
  const unsigned lo = (block[4 + j / 2] >> (4 * (j % 2))) & 0x0fu;
  const unsigned hi = (scales_h >> (2 * j)) & 3u;
  return static_cast<int>(lo | hi << 4) - 32;
}

}  // namespace tandem::kernels::detail
