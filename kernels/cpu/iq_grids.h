// The lattice grids of ggml's i-quants (IQ1_S / IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) and
// their sign rule, for the scalar code (dequantize_iquants.cpp): a code in a block names one grid
// entry of 8 (IQ1, IQ2) or 4 (IQ3) values. The entries come from gguf-py as packed codes
// (iq_grid_codes.h, written by scripts/fixtures/make_iq_grids.py) and are expanded here at
// compile time.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/iq_grid_codes.h"

namespace tandem::kernels::detail {

// The values a grid code's fields index (each type's grid_map in gguf-py).
inline constexpr int8_t kIq1Values[3] = {-1, 0, 1};
inline constexpr uint8_t kIq2Values[3] = {0x08, 0x19, 0x2b};
inline constexpr uint8_t kIq3xxsValues[8] = {0x04, 0x0c, 0x14, 0x1c, 0x24, 0x2c, 0x34, 0x3e};
inline constexpr uint8_t kIq3sValues[8] = {0x01, 0x03, 0x05, 0x07, 0x09, 0x0b, 0x0d, 0x0f};

// A grid: v[i] = entry i's W values. Plain arrays, no member functions: the SIMD files read them
// too, and nothing inline may be shared between files built with different -m flags.
template <typename T, size_t W, size_t N>
struct IqGrid {
  T v[N][W];
};

// Entry i of a grid: value j = values[field j of codes[i]], fields of 2 (3 for 8 values) bits from
// bit 0.
template <typename T, size_t W, size_t N, size_t V>
constexpr IqGrid<T, W, N> expand_grid(const uint16_t (&codes)[N], const T (&values)[V]) {
  constexpr unsigned kBits = V <= 4 ? 2 : 3;
  IqGrid<T, W, N> grid{};
  for (size_t i = 0; i < N; ++i) {
    for (size_t j = 0; j < W; ++j) {
      grid.v[i][j] = values[(codes[i] >> (kBits * j)) & ((1u << kBits) - 1)];
    }
  }
  return grid;
}

inline constexpr auto kIq1sGrid = expand_grid<int8_t, 8>(kIq1sGridCodes, kIq1Values);
inline constexpr auto kIq2xxsGrid = expand_grid<uint8_t, 8>(kIq2xxsGridCodes, kIq2Values);
inline constexpr auto kIq2xsGrid = expand_grid<uint8_t, 8>(kIq2xsGridCodes, kIq2Values);
inline constexpr auto kIq2sGrid = expand_grid<uint8_t, 8>(kIq2sGridCodes, kIq2Values);
inline constexpr auto kIq3xxsGrid = expand_grid<uint8_t, 4>(kIq3xxsGridCodes, kIq3xxsValues);
inline constexpr auto kIq3sGrid = expand_grid<uint8_t, 4>(kIq3sGridCodes, kIq3sValues);

// IQ2_XXS, IQ2_XS and IQ3_XXS store 7 sign bits per 8 values; the eighth makes the count of minus
// signs even. kIqSignBytes.v[s] for the 7 stored bits s: bit j set = value j negative.
struct IqSignBytes {
  uint8_t v[128];
};

constexpr IqSignBytes make_sign_bytes() {
  IqSignBytes t{};
  for (uint32_t s = 0; s < 128; ++s) {
    t.v[s] = static_cast<uint8_t>(s | (static_cast<uint32_t>(std::popcount(s) & 1) << 7));
  }
  return t;
}

inline constexpr IqSignBytes kIqSignBytes = make_sign_bytes();

// The same signs as 8 multipliers, for the SIMD kernels: byte j of kIqSignMasks.v[s] is -1 (0xff)
// where value j is negative, else +1.
struct IqSignMasks {
  uint64_t v[128];
};

constexpr IqSignMasks make_sign_masks() {
  IqSignMasks t{};
  for (uint32_t s = 0; s < 128; ++s) {
    for (uint32_t j = 0; j < 8; ++j) {
      const uint64_t byte = (kIqSignBytes.v[s] >> j) & 1 ? 0xff : 0x01;
      t.v[s] |= byte << (8 * j);
    }
  }
  return t;
}

inline constexpr IqSignMasks kIqSignMasks = make_sign_masks();

// IQ1_S / IQ1_M: every value of a group of 8 is shifted by +-kIq1Delta before scaling.
inline constexpr float kIq1Delta = 0.125f;

}  // namespace tandem::kernels::detail
