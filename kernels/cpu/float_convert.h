// Exact scalar conversions of IEEE half (fp16) and bfloat16 bit patterns to float32.
#pragma once

#include <bit>
#include <cstdint>

namespace tandem::kernels {

// The float32 bit pattern of the fp16 value with bits `h`. Exact for all 65536 inputs: subnormal
// halves become normal floats, infinities stay infinities, and NaNs keep their sign and payload
// (shifted into the top of the float mantissa; a signaling NaN stays signaling, as numpy's
// float16 -> float32 cast does). Integer-only, so FTZ/DAZ modes cannot change the result.
// Pure function; any thread.
constexpr uint32_t fp16_to_fp32_bits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return sign | 0x7f800000u | (mantissa << 13);            // inf, NaN
  if (exponent != 0) return sign | ((exponent + 112) << 23) | (mantissa << 13);  // 127 - 15
  if (mantissa == 0) return sign;                                                // +-0
  // Subnormal: mantissa * 2^-24. Shift the leading one up to bit 10 (the implicit bit).
  const int shift = std::countl_zero(mantissa) - 21;
  mantissa <<= shift;
  return sign | (static_cast<uint32_t>(113 - shift) << 23) | ((mantissa & 0x3ffu) << 13);
}

constexpr float fp16_to_fp32(uint16_t h) {
  return std::bit_cast<float>(fp16_to_fp32_bits(h));
}

// bfloat16 is the top half of a float32, so the conversion is a shift (exact, NaNs kept as is).
constexpr float bf16_to_fp32(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

// The value of the FP8 E4M3 code `b` (OCP "e4m3fn": sign, 4 exponent bits with bias 7, 3 mantissa
// bits, subnormals, no infinities): exact; the NaN codes 0x7F and 0xFF give a quiet NaN, as
// torch's float8_e4m3fn -> float32 cast does. Pure function; any thread.
constexpr float fp8_e4m3_to_fp32(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t exponent = (b >> 3) & 0x0fu;
  const uint32_t mantissa = b & 0x07u;
  if ((b & 0x7fu) == 0x7fu) return std::bit_cast<float>(sign | 0x7fc00000u);
  if (exponent != 0)
    return std::bit_cast<float>(sign | ((exponent + 120) << 23) | (mantissa << 20));
  const float magnitude = static_cast<float>(mantissa) * 0x1p-9f;  // subnormal: m/8 * 2^-6
  return sign != 0 ? -magnitude : magnitude;
}

// Little-endian loads from unaligned bytes (block fields in GGUF data have no alignment).
constexpr uint16_t load_le16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

constexpr uint32_t load_le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

}  // namespace tandem::kernels
