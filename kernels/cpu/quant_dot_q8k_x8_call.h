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

// A tile's tokens: token t's quants, per-super-block scales and Q8_K bsums (16 per super-block);
// in a call that expands its activations (below), xe[t] holds token t's quants expanded: quad k
// (quants 4k .. 4k+3) in all eight 32-bit lanes of the 32 bytes at xe[t] + 32 * k.
template <int T>
struct Q8KTokens {
  const int8_t* xq[T];
  const float* xd[T];
  const int16_t* bsums[T];
  const int8_t* xe[T];
};

// Quad offset / 4 of tile token t (offset a multiple of 4) in every 32-bit lane: a load from the
// expanded copy where the call made one, else a broadcast of the quants.
template <bool kExpanded, int T>
[[gnu::always_inline]] inline __m256i token_quad(const Q8KTokens<T>& x, int t, size_t offset) {
  if constexpr (kExpanded) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(x.xe[t] + 8 * offset));
  } else {
    return broadcast4(x.xq[t] + offset);
  }
}

// The x8_walk kernel of one call; Tile::template run<T, kExpanded>(group, blocks, tokens, outputs)
// computes one group against T <= 4 tokens.
template <class Tile, bool kExpanded>
struct Q8KX8Kernel {
  static constexpr size_t kMaxTokens = 4;
  const X8Call* c;
  const ActivationRows* x;
  const int8_t* expanded;  // kExpanded: token t's expanded quants at expanded + 8 * t * cols

  template <int T>
  void tile(size_t g, size_t t0, const X8Outputs<T>& y) const {
    Q8KTokens<T> tokens;
    for (int i = 0; i < T; ++i) {
      const size_t t = t0 + static_cast<size_t>(i);
      tokens.xq[i] = x->qs + t * x->cols;
      tokens.xd[i] = x->d + t * c->blocks;
      tokens.bsums[i] = x->bsums + t * c->blocks * 16;
      tokens.xe[i] = kExpanded ? expanded + 8 * t * x->cols : nullptr;
    }
    Tile::template run<T, kExpanded>(c->groups + g * c->group_bytes, c->blocks, tokens, y);
  }
};

// The InterleavedDotFn contract (quant_dot.h) on Tile, for groups of block_bytes per super-block.
template <class Tile>
void q8k_x8_dot(const uint8_t* groups, size_t block_bytes, size_t row_begin, size_t row_end,
                const ActivationRows& x, float* y, size_t y_stride) {
  const size_t blocks = x.cols / 256;
  const X8Call c{groups, blocks * block_bytes, blocks, row_begin, row_end, x.n_tokens, y, y_stride};
  x8_walk_expanded<Tile>(c, x, [&](auto expanded_tag, const int8_t* expanded) {
    return Q8KX8Kernel<Tile, decltype(expanded_tag)::value>{&c, &x, expanded};
  });
}

}  // namespace
}  // namespace tandem::kernels::detail
