// Test helper: the bytes of a random weight matrix in F32, F16, BF16 or Q8_0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/float_convert.h"
#include "kernels/tensor_type.h"

namespace tandem::testing {

// rows x cols in the row layout of kernels::WeightMatrix. Float types hold values uniform in
// [-magnitude, magnitude] (rounded to the type); Q8_0 rows hold random int8 quants with scales in
// [0.0005, 0.003] (|value| <= ~0.4), whatever the magnitude. cols must be a multiple of 32 for
// Q8_0.
inline std::vector<uint8_t> random_weight_bytes(TensorType type, size_t rows, size_t cols,
                                                float magnitude, std::mt19937& rng) {
  std::uniform_real_distribution<float> value(-magnitude, magnitude);
  std::vector<uint8_t> bytes;
  auto put16 = [&](uint16_t v) {
    bytes.push_back(static_cast<uint8_t>(v & 0xff));
    bytes.push_back(static_cast<uint8_t>(v >> 8));
  };
  for (size_t r = 0; r < rows; ++r) {
    if (type == TensorType::kQ8_0) {
      std::uniform_int_distribution<int> q(-127, 127);
      std::uniform_real_distribution<float> d(0.0005f, 0.003f);
      for (size_t b = 0; b < cols / 32; ++b) {
        put16(kernels::fp32_to_fp16_bits(d(rng)));
        for (int j = 0; j < 32; ++j) bytes.push_back(static_cast<uint8_t>(q(rng)));
      }
      continue;
    }
    for (size_t c = 0; c < cols; ++c) {
      const float f = value(rng);
      if (type == TensorType::kF32) {
        const auto* p = reinterpret_cast<const uint8_t*>(&f);
        bytes.insert(bytes.end(), p, p + 4);
      } else if (type == TensorType::kF16) {
        put16(kernels::fp32_to_fp16_bits(f));
      } else {  // BF16: the top half
        uint32_t bits = 0;
        std::memcpy(&bits, &f, 4);
        put16(static_cast<uint16_t>(bits >> 16));
      }
    }
  }
  return bytes;
}

}  // namespace tandem::testing
