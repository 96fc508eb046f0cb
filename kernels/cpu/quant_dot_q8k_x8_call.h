// The call frame shared by the x8 kernels that meet Q8_K activations (Q4_K x8, Q6_K x8): a tile's
// tokens, the x8_walk kernel that gathers them, and the InterleavedDotFn body. Include after
// quant_dot_x8_walk.h, under the including file's -m flags; internal linkage.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/quant_dot_x8_walk.h"

namespace tandem::kernels::detail {
namespace {

// A tile's tokens: token t's quants, per-super-block scales and Q8_K bsums (16 per super-block).
template <int T>
struct Q8KTokens {
  const int8_t* xq[T];
  const float* xd[T];
  const int16_t* bsums[T];
};

// The x8_walk kernel of one call; Tile::template run<T>(group, blocks, tokens, outputs) computes
// one group against T <= 4 tokens.
template <class Tile>
struct Q8KX8Kernel {
  static constexpr size_t kMaxTokens = 4;
  const X8Call* c;
  const ActivationRows* x;

  template <int T>
  void tile(size_t g, size_t t0, const X8Outputs<T>& y) const {
    Q8KTokens<T> tokens;
    for (int i = 0; i < T; ++i) {
      const size_t t = t0 + static_cast<size_t>(i);
      tokens.xq[i] = x->qs + t * x->cols;
      tokens.xd[i] = x->d + t * c->blocks;
      tokens.bsums[i] = x->bsums + t * c->blocks * 16;
    }
    Tile::template run<T>(c->groups + g * c->group_bytes, c->blocks, tokens, y);
  }
};

// The InterleavedDotFn contract (quant_dot.h) on Tile, for groups of block_bytes per super-block.
template <class Tile>
void q8k_x8_dot(const uint8_t* groups, size_t block_bytes, size_t row_begin, size_t row_end,
                const ActivationRows& x, float* y, size_t y_stride) {
  const size_t blocks = x.cols / 256;
  const X8Call c{groups, blocks * block_bytes, blocks, row_begin, row_end, x.n_tokens, y, y_stride};
  x8_walk(c, Q8KX8Kernel<Tile>{&c, &x});
}

}  // namespace
}  // namespace tandem::kernels::detail
