// A barrier that keeps GCC from reassociating chains of vector integer adds in the int8 kernels.
// Integer addition is associative, so GCC's reassociation pass may rebalance a chain such as
// acc = acc + maddubs(w_m, x_m) over a tile's quads into a tree: it then computes every product
// of the unrolled loop first and spills them (64 ymm stores per chunk in the AVX2 Q4_K x8 tile,
// which ran at 142 GFLOP/s with 128 tokens on a Zen 4 thread and at 203 with the barrier).
// Passing each new sum through an empty asm statement makes it opaque to the optimizer, so the
// chain stays in program order and in registers; the statement emits no instruction.
#pragma once

namespace tandem::kernels::detail {

// v, unchanged, as a value the compiler cannot see through. For __m256i / __m512i (or any vector
// type that lives in an SSE/AVX register).
template <class V>
[[gnu::always_inline]] inline V chain_barrier(V v) {
  asm("" : "+v"(v));
  return v;
}

}  // namespace tandem::kernels::detail
