// The MXFP4 x Q8_0 kernels of the interleaved x8 layout (quant_dot.h), bit-identical to the scalar
// reference dot_mxfp4_scalar on the plain rows, as templates that each ISA file
// (quant_dot_mxfp4_x8_avx2.cpp, quant_dot_mxfp4_x8_avx512_vnni.cpp) instantiates under its own -m
// flags with its `Isa`: a struct whose static `__m256i block_sums(const Unpacked& w, const int8_t*
// xb)` returns, in lane i, row i's exact int32 sum of u * x over one block (u the biased weights
// below, xb one token's 32 activation quants) and whose `kPrefetchAhead` is the few-token tiles'
// prefetch distance in bytes (0: none); an Isa with `kExpandTokens` (quant_dot_x8_walk.h) also has
// `expanded_block_sums(const Unpacked& w, const int8_t* xe)`, the same sums from the block's
// expanded quants, which calls of up to kExpandTokens tokens use. Everything here has internal
// linkage (see quant_dot_kquants_tiles.h for why).
//
// Technique: one 32-bit lane per weight row, with no horizontal reduction. A group's block is four
// 32-byte loads; 32-bit lane i of load k holds row i's quant bytes 4k .. 4k+3, whose low nibbles
// are elements 4k .. 4k+3 and high nibbles elements 16+4k .. 16+4k+3. Each nibble is looked up as
// the unsigned byte u = kMxfp4Values[q] + 12 (0..24), multiplied by the matching four activation
// quants broadcast to every lane, and the products are summed within each lane: lane i ends as row
// i's sum of u * x over the block, and subtracting 12 * sum(x) (precomputed per activation block)
// gives the exact isum of every row. Then, lane-wise and in block order, term = float(isum) * (de *
// dx) and acc = acc + term as separate instructions: the scalar reference's float operations for
// each row.
//
// Register blocking (the walk of quant_dot_x8_walk.h): one group per tile, its block unpacked
// once into registers and up to eight tokens run over it.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/quant_dot_x8_walk.h"

namespace tandem::kernels::detail {
namespace {

constexpr size_t kBlock = 32;
constexpr size_t kBlockBytes = 136;  // 8 exponents, then 8 rows x 16 quant bytes
constexpr size_t kScaleBytes = 8;
constexpr int32_t kBias = 12;
// Activation blocks whose bias sums fit on the stack (16 KiB); larger inputs use the heap.
constexpr size_t kStackBiasSums = 4096;

// The helpers below are forced inline: -O2 keeps a multi-use one out of line, and its register
// arguments then go through memory in the inner loop.

// A group's block unpacked: lo[k] / hi[k] hold, in lane i, row i's elements 4k .. 4k+3 /
// 16+4k .. 16+4k+3 as u = kMxfp4Values[q] + 12.
struct Unpacked {
  __m256i lo[4];
  __m256i hi[4];
};

[[gnu::always_inline]] inline Unpacked unpack(const uint8_t* block) {
  // The doubled E2M1 values plus 12, indexed by the 4-bit code, in both 128-bit halves.
  const __m256i biased_values =
      _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,  //
                       12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
  const __m256i mask = _mm256_set1_epi8(0x0f);
  Unpacked u;
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m256i v =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kScaleBytes + 32 * k));
    u.lo[k] = _mm256_shuffle_epi8(biased_values, _mm256_and_si256(v, mask));
    u.hi[k] = _mm256_shuffle_epi8(biased_values, _mm256_and_si256(_mm256_srli_epi16(v, 4), mask));
  }
  return u;
}

// The eight rows' de = 2^(e - 128): e >= 2 is the normal float with biased exponent e - 1; e = 0
// and 1 are the subnormals 0x00200000 << e. The normal pattern (e - 1) << 23 is negative for
// e = 0, 0 for e = 1 and at least 0x00800000 = 0x00200000 << 2 otherwise, so the larger of it and
// 0x00200000 << min(e, 2) is the right one for every e (e = 255 gives 2^127, as the scalar code).
[[gnu::always_inline]] inline __m256 scales(const uint8_t* block) {
  const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(block)));
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i subnormal =
      _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), _mm256_min_epi32(e, _mm256_set1_epi32(2)));
  return _mm256_castsi256_ps(_mm256_max_epi32(normal, subnormal));
}

// One token tile's activations: quants xq[t], scales xd[t] and bias sums bias[t] of token t; in a
// call that expands its activations (quant_dot_x8_walk.h), xe[t] holds token t's expanded quants.
template <int kTokens>
struct TokenTile {
  const int8_t* xq[kTokens];
  const float* xd[kTokens];
  const int32_t* bias[kTokens];
  const int8_t* xe[kTokens];
};

// One group against a tile of kTokens tokens, unpacking each block once into registers and running
// every token over it. A group is one sequential run of bytes: tiles of up to 4 tokens prefetch
// Isa::kPrefetchAhead bytes ahead where the instruction set asks for it (prefetch_ahead.h), else
// the hardware prefetchers alone stream it (see quant_dot_x8_walk.h).
template <class Isa, int kTokens, bool kExpanded>
void tall_tile(const uint8_t* g, size_t blocks, const TokenTile<kTokens>& x,
               const X8Outputs<kTokens>& y) {
  __m256 acc[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) acc[t] = _mm256_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* block = g + b * kBlockBytes;
    prefetch_tile_block<Isa::kPrefetchAhead, kTokens>(block, kBlockBytes);
    const Unpacked w = unpack(block);
    const __m256 de = scales(block);
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) {
      __m256i sums;
      if constexpr (kExpanded) {
        sums = Isa::expanded_block_sums(w, x.xe[t] + 8 * b * kBlock);
      } else {
        sums = Isa::block_sums(w, x.xq[t] + b * kBlock);
      }
      const __m256i isum = _mm256_sub_epi32(sums, _mm256_set1_epi32(x.bias[t][b]));
      const __m256 scale = _mm256_mul_ps(de, _mm256_set1_ps(x.xd[t][b]));
      acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(_mm256_cvtepi32_ps(isum), scale));
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) store_lanes(acc[t], y.out[t], y.lane_begin, y.lane_end);
}

// The x8_walk kernel of one call: eight tokens at most per tile.
template <class Isa, bool kExpanded>
struct Mxfp4X8Kernel {
  static constexpr size_t kMaxTokens = 8;
  const X8Call* c;
  const ActivationRows* x;
  const int32_t* bias_sums;
  const int8_t* expanded;  // kExpanded: token t's expanded quants at expanded + 8 * t * cols

  template <int T>
  void tile(size_t g, size_t t0, const X8Outputs<T>& y) const {
    TokenTile<T> tokens;
    for (int i = 0; i < T; ++i) {
      const size_t t = t0 + static_cast<size_t>(i);
      tokens.xq[i] = x->qs + t * x->cols;
      tokens.xd[i] = x->d + t * c->blocks;
      tokens.bias[i] = bias_sums + t * c->blocks;
      tokens.xe[i] = kExpanded ? expanded + 8 * t * x->cols : nullptr;
    }
    tall_tile<Isa, T, kExpanded>(c->groups + g * c->group_bytes, c->blocks, tokens, y);
  }
};

// kBias * (sum of the block's 32 quants) for n activation blocks at qs: exact in int32.
inline void bias_sums_of(const int8_t* qs, size_t n, int32_t* out) {
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(kBias));
  const __m256i ones = _mm256_set1_epi16(1);
  for (size_t i = 0; i < n; ++i) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + i * kBlock));
    const __m256i s8 = _mm256_madd_epi16(_mm256_maddubs_epi16(bias, q), ones);
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    out[i] = _mm_cvtsi128_si32(s);
  }
}

// The bias sums of every activation block of a call: on the stack for up to kStackBiasSums blocks,
// else on the heap.
class BiasSums {
 public:
  explicit BiasSums(const ActivationRows& x) {
    const size_t n = x.n_tokens * (x.cols / kBlock);
    if (n > kStackBiasSums) heap_ = std::make_unique<int32_t[]>(n);
    bias_sums_of(x.qs, n, data());
  }
  BiasSums(const BiasSums&) = delete;
  BiasSums& operator=(const BiasSums&) = delete;
  int32_t* data() { return heap_ ? heap_.get() : stack_; }

 private:
  int32_t stack_[kStackBiasSums];
  std::unique_ptr<int32_t[]> heap_;
};

// The whole call: bias sums of every activation block, then the walk.
template <class Isa>
void dot_mxfp4_x8(const uint8_t* groups, size_t row_begin, size_t row_end, const ActivationRows& x,
                  float* y, size_t y_stride) {
  const size_t blocks = x.cols / kBlock;
  const size_t n = x.n_tokens;
  if (row_begin >= row_end || n == 0) return;
  BiasSums bias_sums(x);
  const X8Call c{groups, blocks * kBlockBytes, blocks, row_begin, row_end, n, y, y_stride};
  x8_walk_expanded<Isa>(c, x, [&](auto expanded_tag, const int8_t* expanded) {
    return Mxfp4X8Kernel<Isa, decltype(expanded_tag)::value>{&c, &x, bias_sums.data(), expanded};
  });
}

}  // namespace
}  // namespace tandem::kernels::detail
