// IQ4_XS plain rows for the tokens-in-lanes walk of quant_dot_x8_lanes.h (rows_lanes_dot): eight
// rows' super-block decoded once per call into the window, each code as its non-linear value
// (-127..113, a signed byte), the sub-blocks' scales ls_j - 32 and d per row; per super-block the
// reference's isum = sum_j (ls_j - 32) * (sum over sub-block j of value * xq) and sum += (dw * dx)
// * float(isum). Values up to 127 would saturate AVX2's maddubs pairs, so only the AVX-512 VNNI
// walk takes this layout. Include after quant_dot_iq4_xs_tiles.h (its scale and value decoding), as
// AVX2 code under the including file's flags; internal linkage.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_dot_iq4_xs_tiles.h"
#include "kernels/cpu/quant_dot_x8_lanes.h"

namespace tandem::kernels::detail {
namespace {

struct Iq4XsLanes {
  static constexpr size_t kBlockBytes = kIq4XsBlockBytes;
  static constexpr size_t kScaleQuads = 8;  // a scale per 32-element sub-block
  static constexpr int kMinPairs = 0;
  static constexpr int kMaxWeight = 127;  // largest |weight| in the window
  // Any partial last register is padded: the plain-row tiles that would take the rest run at a
  // third of the lanes' rate (91 against 295 GFLOP/s per Zen 4 thread at 64 tokens).
  static constexpr bool kPadAll = true;

  template <int J>
  [[gnu::always_inline]] static void sub_block(const uint8_t* qs, int8_t* out) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 32 * J), iq4_xs_values<J>(qs));
  }

  // Super-block b of rows 0 .. 7 (row i at w + i * row_bytes).
  static void unpack_rows(const uint8_t* w, size_t row_bytes, size_t b, LaneBlock& p) {
    alignas(32) int8_t vals[kLaneRows][kLaneSuper];
    for (size_t i = 0; i < kLaneRows; ++i) {
      const uint8_t* blk = w + i * row_bytes + b * kBlockBytes;
      alignas(32) int16_t sc[16];
      _mm256_store_si256(reinterpret_cast<__m256i*>(sc), iq4_xs_scales(blk));
      for (size_t j = 0; j < 8; ++j) p.sc[j][i] = sc[j];
      const uint8_t* qs = blk + 8;
      sub_block<0>(qs, vals[i]);
      sub_block<1>(qs, vals[i]);
      sub_block<2>(qs, vals[i]);
      sub_block<3>(qs, vals[i]);
      sub_block<4>(qs, vals[i]);
      sub_block<5>(qs, vals[i]);
      sub_block<6>(qs, vals[i]);
      sub_block<7>(qs, vals[i]);
      p.dw[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(load_u16(blk))));
    }
    lanes_window_from_rows(vals, kScaleQuads, p);
  }
};

}  // namespace
}  // namespace tandem::kernels::detail
