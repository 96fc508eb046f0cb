// Test helper: the bytes of a random weight matrix in F32, F16, BF16, Q8_0, Q4_0, MXFP4, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K or F8_E4M3_B128.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/float_convert.h"
#include "kernels/tensor_type.h"

namespace tandem::testing {

// Random bytes (any quants, any packed scales) of a rows x cols matrix of a block type other than
// Q8_0, whose fp16 / E8M0 block scales are then set so that |value| <= ~magnitude. One MXFP4
// block in 16 gets the subnormal scale 2^-128 or 2^-127. cols must be whole blocks of the type;
// std::invalid_argument for a type without a generator.
inline std::vector<uint8_t> random_quant_bytes(TensorType type, size_t rows, size_t cols,
                                               float magnitude, std::mt19937& rng) {
  const auto traits = tensor_type_traits(type);
  if (!traits || cols % traits->block_elements != 0) {
    throw std::invalid_argument("random_quant_bytes: bad type or cols");
  }
  const size_t n_blocks = rows * (cols / traits->block_elements);
  std::vector<uint8_t> bytes(n_blocks * traits->block_bytes);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  const float m = magnitude / 0.4f;  // the ranges below give |value| <= ~0.4
  auto put_half = [&](uint8_t* p, float lo, float hi) {
    const uint16_t h =
        kernels::fp32_to_fp16_bits(std::uniform_real_distribution<float>(lo * m, hi * m)(rng));
    p[0] = static_cast<uint8_t>(h & 0xff);
    p[1] = static_cast<uint8_t>(h >> 8);
  };
  // 2^(e - 128) * 12 <= ~0.4 * m for e up to 123 + log2(m).
  const int top = 123 + static_cast<int>(std::floor(std::log2(m)));
  for (size_t b = 0; b < n_blocks; ++b) {
    uint8_t* block = bytes.data() + b * traits->block_bytes;
    switch (type) {
      case TensorType::kQ4_0:  // (q - 8) * d, q < 16
        put_half(block, -0.05f, 0.05f);
        break;
      case TensorType::kQ4_1:  // q * d + m, q < 16
        put_half(block, -0.025f, 0.025f);
        put_half(block + 2, -0.02f, 0.02f);
        break;
      case TensorType::kQ5_0:  // (q - 16) * d, q < 32
        put_half(block, -0.025f, 0.025f);
        break;
      case TensorType::kQ5_1:  // q * d + m, q < 32
        put_half(block, -0.012f, 0.012f);
        put_half(block + 2, -0.02f, 0.02f);
        break;
      case TensorType::kMXFP4:  // kvalues[q] * 2^(e - 128), |kvalues| <= 12
        block[0] = static_cast<uint8_t>(rng() % 16 == 0 ? rng() % 2 : top - 5 + rng() % 6);
        break;
      case TensorType::kQ2_K:  // (d * scale) * q - dmin * min, scale and min < 16, q < 4
        put_half(block + 80, 1e-3f, 8e-3f);
        put_half(block + 82, 1e-3f, 2.5e-2f);
        break;
      case TensorType::kQ3_K:  // (d * scale) * q, |scale| <= 32, |q| <= 4
        put_half(block + 108, -3e-3f, 3e-3f);
        break;
      case TensorType::kQ4_K:  // (d * scale) * q - dmin * min, scale and min < 64, q < 16
        put_half(block, 1e-4f, 4e-4f);
        put_half(block + 2, 1e-4f, 6e-3f);
        break;
      case TensorType::kQ5_K:  // as Q4_K with q < 32
        put_half(block, 5e-5f, 2e-4f);
        put_half(block + 2, 1e-4f, 6e-3f);
        break;
      case TensorType::kQ6_K:  // (d * scale) * (q - 32), |scale| <= 128
        put_half(block + 208, -1e-4f, 1e-4f);
        break;
      case TensorType::kF8_E4M3_B128: {  // value(code) * scale, |value| <= 448; no NaN codes
        const float scale =
            std::uniform_real_distribution<float>(0.2f, 1.0f)(rng) * 0.4f * m / 448.0f;
        std::memcpy(block, &scale, 4);
        for (size_t j = 4; j < 132; ++j) {
          if ((block[j] & 0x7f) == 0x7f) block[j] ^= 1;
        }
        break;
      }
      default:
        throw std::invalid_argument("random_quant_bytes: no generator for this type");
    }
  }
  return bytes;
}

// rows x cols in the row layout of kernels::WeightMatrix. Float types hold values uniform in
// [-magnitude, magnitude] (rounded to the type); Q8_0 rows hold random int8 quants with scales in
// [0.0005, 0.003] (|value| <= ~0.4), whatever the magnitude; the other block types come from
// random_quant_bytes. cols must be whole blocks of the type.
inline std::vector<uint8_t> random_weight_bytes(TensorType type, size_t rows, size_t cols,
                                                float magnitude, std::mt19937& rng) {
  if (type != TensorType::kF32 && type != TensorType::kF16 && type != TensorType::kBF16 &&
      type != TensorType::kQ8_0) {
    return random_quant_bytes(type, rows, cols, magnitude, rng);
  }
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
