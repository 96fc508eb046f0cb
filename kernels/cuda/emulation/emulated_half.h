// The CUDA emulation's __half (cuda_fp16.h): the IEEE binary16 bits and the conversions the kernels
// use, written here from the IEEE 754 rules (not with the project's own kernels/cpu conversions,
// so that a test comparing a kernel's halves with the host's compares two implementations).
#pragma once

#include <bit>
#include <cstdint>

struct __half {
  unsigned short bits;
};

// Exact: every half is a float.
inline float __half2float(__half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const int exponent = (h.bits >> 10) & 0x1f;
  const uint32_t mantissa = h.bits & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | (static_cast<uint32_t>(exponent + 112) << 23) |
                              (mantissa << 13));
}

// Round to the nearest half, ties to even; beyond the largest half, infinity; NaN stays NaN.
inline __half __float2half_rn(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint32_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf, or NaN (kept quiet, with the top of its payload)
    const uint32_t nan = abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u;
    return __half{static_cast<unsigned short>(sign | 0x7c00u | nan)};
  }
  if (abs < 0x00800000u) return __half{static_cast<unsigned short>(sign)};  // float subnormal
  const int exponent = static_cast<int>(abs >> 23) - 127;
  if (exponent > 15) return __half{static_cast<unsigned short>(sign | 0x7c00u)};
  // The value is significand * 2^(exponent - 23); count it in units of the result's last place:
  // 2^(exponent - 10) for a normal half, 2^-24 for a subnormal one.
  const uint32_t significand = (abs & 0x7fffffu) | 0x800000u;
  const int unit_exp = exponent < -14 ? -24 : exponent - 10;
  const int drop = unit_exp - (exponent - 23);                      // >= 13
  if (drop > 24) return __half{static_cast<unsigned short>(sign)};  // below half the least unit
  uint32_t q = significand >> drop;
  const uint32_t rest = significand & ((1u << drop) - 1u);
  const uint32_t half_unit = 1u << (drop - 1);
  if (rest > half_unit || (rest == half_unit && (q & 1u) != 0)) ++q;
  // A normal q holds the implicit bit (0x400) and may carry to 0x800: the next binade, or
  // infinity from 65520 up. A subnormal q may round up to 0x400, the least normal half.
  const uint32_t bits = unit_exp == -24 ? q : (static_cast<uint32_t>(exponent + 14) << 10) + q;
  return __half{static_cast<unsigned short>(sign | bits)};
}

inline __half __ushort_as_half(unsigned short bits) {
  return __half{bits};
}
