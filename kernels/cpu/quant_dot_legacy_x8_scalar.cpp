// The x8 block interleave of Q8_0, Q4_0, Q5_0 and IQ4_NL and Q8_0's row-quad interleave
// (quant_dot.h): the repacks and the scalar dot products, which gather each row's blocks back into
// a plain row and run the plain scalar reference on it (the SIMD kernels read the interleaves in
// place).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/quant_dot.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kGroupRows = 8;
constexpr size_t kBlockElements = 32;

template <size_t kBytes>
void repack_blocks8(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups) {
  const size_t blocks = row_bytes / kBytes;
  const size_t n_groups = (rows + kGroupRows - 1) / kGroupRows;
  for (size_t g = 0; g < n_groups; ++g) {
    uint8_t* out = groups + g * kGroupRows * row_bytes;
    for (size_t b = 0; b < blocks; ++b) {
      for (size_t i = 0; i < kGroupRows; ++i, out += kBytes) {
        const size_t r = g * kGroupRows + i;
        if (r < rows) {
          std::memcpy(out, w + r * row_bytes + b * kBytes, kBytes);
        } else {
          std::memset(out, 0, kBytes);  // padding row: scale 0
        }
      }
    }
  }
}

template <size_t kBytes, QuantDotFn kPlain>
void dot_blocks8_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                        const ActivationRows& x, float* y, size_t y_stride) {
  const size_t blocks = x.cols / kBlockElements;
  const size_t row_bytes = blocks * kBytes;
  std::vector<uint8_t> row(row_bytes);
  for (size_t r = row_begin; r < row_end; ++r) {
    const uint8_t* first =
        groups + r / kGroupRows * kGroupRows * row_bytes + r % kGroupRows * kBytes;
    for (size_t b = 0; b < blocks; ++b) {
      std::memcpy(row.data() + b * kBytes, first + b * kGroupRows * kBytes, kBytes);
    }
    kPlain(row.data(), row_bytes, 1, x, y + (r - row_begin), y_stride);
  }
}

// Row r's plain Q8_0 block b, gathered from the row-quad interleave (group_bytes per group).
void gather_q8_0_quads(const uint8_t* groups, size_t group_bytes, size_t r, size_t b,
                       uint8_t* block) {
  const uint8_t* at = groups + r / kGroupRows * group_bytes + b * kQ8_0QuadBlockBytes;
  const size_t i = r % kGroupRows;
  std::memcpy(block, at + 2 * i, 2);
  for (size_t k = 0; k < kBlockElements / 4; ++k) {
    std::memcpy(block + 2 + 4 * k, at + 2 * kGroupRows + 32 * k + 4 * i, 4);
  }
}

}  // namespace

void repack_q8_0_quads(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups) {
  constexpr size_t kBytes = 34;
  const size_t blocks = row_bytes / kBytes;
  const size_t n_groups = (rows + kGroupRows - 1) / kGroupRows;
  // Block by block, so that each 272-byte block is written in one pass.
  for (size_t g = 0; g < n_groups; ++g) {
    uint8_t* at = groups + g * kGroupRows * row_bytes;
    for (size_t b = 0; b < blocks; ++b, at += kQ8_0QuadBlockBytes) {
      for (size_t i = 0; i < kGroupRows; ++i) {
        const size_t r = g * kGroupRows + i;
        if (r >= rows) {  // padding row: scale 0, quants 0
          std::memset(at + 2 * i, 0, 2);
          for (size_t k = 0; k < kBlockElements / 4; ++k) {
            std::memset(at + 2 * kGroupRows + 32 * k + 4 * i, 0, 4);
          }
          continue;
        }
        const uint8_t* src = w + r * row_bytes + b * kBytes;
        std::memcpy(at + 2 * i, src, 2);
        for (size_t k = 0; k < kBlockElements / 4; ++k) {
          std::memcpy(at + 2 * kGroupRows + 32 * k + 4 * i, src + 2 + 4 * k, 4);
        }
      }
    }
  }
}

void dot_q8_0_quads_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                           const ActivationRows& x, float* y, size_t y_stride) {
  constexpr size_t kBytes = 34;
  const size_t blocks = x.cols / kBlockElements;
  std::vector<uint8_t> row(blocks * kBytes);
  for (size_t r = row_begin; r < row_end; ++r) {
    for (size_t b = 0; b < blocks; ++b) {
      gather_q8_0_quads(groups, blocks * kQ8_0QuadBlockBytes, r, b, row.data() + b * kBytes);
    }
    dot_q8_0_scalar(row.data(), row.size(), 1, x, y + (r - row_begin), y_stride);
  }
}

void repack_q8_0_x8(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups) {
  repack_blocks8<34>(w, row_bytes, rows, groups);
}
void repack_q4_0_x8(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups) {
  repack_blocks8<18>(w, row_bytes, rows, groups);
}
void repack_q5_0_x8(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups) {
  repack_blocks8<22>(w, row_bytes, rows, groups);
}
void repack_iq4_nl_x8(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups) {
  repack_blocks8<18>(w, row_bytes, rows, groups);
}

void dot_q8_0_x8_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                        const ActivationRows& x, float* y, size_t y_stride) {
  dot_blocks8_scalar<34, dot_q8_0_scalar>(groups, row_begin, row_end, x, y, y_stride);
}
void dot_q4_0_x8_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                        const ActivationRows& x, float* y, size_t y_stride) {
  dot_blocks8_scalar<18, dot_q4_0_scalar>(groups, row_begin, row_end, x, y, y_stride);
}
void dot_q5_0_x8_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                        const ActivationRows& x, float* y, size_t y_stride) {
  dot_blocks8_scalar<22, dot_q5_0_scalar>(groups, row_begin, row_end, x, y, y_stride);
}
void dot_iq4_nl_x8_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                          const ActivationRows& x, float* y, size_t y_stride) {
  dot_blocks8_scalar<18, dot_iq4_nl_scalar>(groups, row_begin, row_end, x, y, y_stride);
}

}  // namespace tandem::kernels::detail
