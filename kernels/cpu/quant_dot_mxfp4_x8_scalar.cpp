// The MXFP4 x8 interleaved layout (quant_dot.h): the repack from plain GGUF rows and the scalar
// dot product on it (dot_mxfp4_scalar's arithmetic, read through the layout; built with
// -ffp-contract=off).
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/mxfp4_values.h"
#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kBlock = 32;
constexpr size_t kHalf = kBlock / 2;
constexpr size_t kGroupRows = 8;
constexpr size_t kMxfp4Bytes = 17;
constexpr size_t kBlockBytes = 136;
constexpr size_t kScaleBytes = 8;

// The byte offset, within a group's block, of row i's quant byte j (j < 16).
size_t quant_offset(size_t i, size_t j) {
  return kScaleBytes + 32 * (j / 4) + 4 * i + j % 4;
}

}  // namespace

void repack_mxfp4_x8(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups) {
  const size_t blocks = row_bytes / kMxfp4Bytes;
  const size_t n_groups = (rows + kGroupRows - 1) / kGroupRows;
  for (size_t g = 0; g < n_groups; ++g) {
    for (size_t b = 0; b < blocks; ++b) {
      uint8_t* dst = groups + (g * blocks + b) * kBlockBytes;
      for (size_t i = 0; i < kGroupRows; ++i) {
        const size_t r = g * kGroupRows + i;
        if (r >= rows) {
          dst[i] = 0;
          for (size_t k = 0; k < 4; ++k) std::memset(dst + quant_offset(i, 4 * k), 0, 4);
          continue;
        }
        const uint8_t* src = w + r * row_bytes + b * kMxfp4Bytes;
        dst[i] = src[0];
        for (size_t k = 0; k < 4; ++k)
          std::memcpy(dst + quant_offset(i, 4 * k), src + 1 + 4 * k, 4);
      }
    }
  }
}

void dot_mxfp4_x8_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                         const ActivationRows& x, float* y, size_t y_stride) {
  const size_t blocks = x.cols / kBlock;
  for (size_t t = 0; t < x.n_tokens; ++t) {
    const int8_t* xq = x.qs + t * x.cols;
    const float* xd = x.d + t * blocks;
    for (size_t r = row_begin; r < row_end; ++r) {
      const uint8_t* group = groups + r / kGroupRows * blocks * kBlockBytes;
      const size_t i = r % kGroupRows;
      float sum = 0.0f;
      for (size_t b = 0; b < blocks; ++b) {
        const uint8_t* block = group + b * kBlockBytes;
        int32_t isum = 0;
        for (size_t j = 0; j < kHalf; ++j) {
          const uint8_t q = block[quant_offset(i, j)];
          isum += kMxfp4Values[q & 0x0f] * xq[b * kBlock + j];
          isum += kMxfp4Values[q >> 4] * xq[b * kBlock + j + kHalf];
        }
        const float scale = xd[b] * e8m0_half(block[i]);
        sum += static_cast<float>(isum) * scale;
      }
      y[t * y_stride + (r - row_begin)] = sum;
    }
  }
}

}  // namespace tandem::kernels::detail
