// prefetch_ahead: the software prefetch of the few-token tiles on instruction sets that ask for it
// (an ISA struct's kPrefetchAhead > 0, or the AVX2 legacy groups' kAhead). Internal linkage, so
// each kernel file gets its own copy under its own -m flags (see quant_dot_kquants_tiles.h).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace tandem::kernels::detail {
namespace {

// Prefetches into L1 the cache lines of [p + ahead, p + ahead + bytes): called once per block that
// a few-token tile streams. On the first-generation Zen EPYC (AVX2 only) the hardware prefetchers
// alone left a one-token tile streaming a 256 MiB Q8_0 matrix at 6.8-7.1 GB/s against 10.7-11.0 in
// cache; 2 KiB ahead it streamed at 10.7-10.8 (512 B: 9.9-10.0, 4 KiB into L2: 9.4-11.1).
[[gnu::always_inline]] inline void prefetch_ahead(const uint8_t* p, size_t ahead, size_t bytes) {
  constexpr uintptr_t kLine = 64;
  const uintptr_t first = (reinterpret_cast<uintptr_t>(p) + ahead) & ~(kLine - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + ahead + bytes;
  for (uintptr_t a = first; a < end; a += kLine) {
    _mm_prefetch(reinterpret_cast<const char*>(a), _MM_HINT_T0);
  }
}

// The x8 tiles' rule, in one place: a tile of kTokens tokens prefetches the block it streams
// kAhead bytes ahead when it has at most 4 tokens (from 8 tokens the compute hides the memory)
// and its instruction set asks for it (kAhead > 0; 0 on the AVX-512 VNNI tiles, which the
// hardware prefetchers alone keep at the memory rate).
template <size_t kAhead, int kTokens>
[[gnu::always_inline]] inline void prefetch_tile_block(const uint8_t* block, size_t bytes) {
  if constexpr (kTokens <= 4 && kAhead > 0) prefetch_ahead(block, kAhead, bytes);
}

}  // namespace
}  // namespace tandem::kernels::detail
