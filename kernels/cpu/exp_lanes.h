// The exp approximation of the exp row kernels (exp_rows.h) as lane operations, shared by the
// scalar reference and the SIMD variants so that they run the same operations in the same order.
// Each file includes it under its own flags after defining, in tandem::kernels::detail's anonymous
// namespace, a struct Lanes with:
//   using F (float lanes), using I (int32 lanes);
//   static F set1(float), fma(F, F, F) (one rounding), add, sub, mul, div(F, F);
//   static F max(F a, F b) = a > b ? a : b, min(F a, F b) = a < b ? a : b (lane-wise, x86's
//     maxps/minps: b where either is NaN);
//   static I bits(F), static F from_bits(I) (reinterpretation), set1_i(int32_t),
//     add_i, sub_i(I, I), half_i(I) (arithmetic shift right by 1), exponent_i(I) (shift left 23).
// Everything here has internal linkage: no AVX code can reach another file's callers.
#pragma once

#include <cstdint>

namespace tandem::kernels::detail {
namespace {

// exp(x) = 2^n e^r with n = nearest integer to x / ln 2 and r = x - n ln 2 in [-ln2/2, ln2/2]:
// ln 2 in two parts (hi is the float nearest ln 2, lo the float nearest the rest; the fused
// multiply-add makes x - n hi exact), e^r = 1 + r + r^2 (c2 + c3 r + ... + c6 r^4) in Horner form,
// c2..c6 the float-rounded interpolant of (e^r - 1 - r) / r^2 at the 5 Chebyshev nodes of the
// interval (computed for this file). 2^n is applied as 2^(n >> 1) * 2^(n - (n >> 1)), each factor
// a normal float, so results near overflow and in the subnormal range are rounded once. x is
// clamped to [-104, 89] first: e^-104 < 2^-150 rounds to +0 (so -inf gives +0) and e^89 overflows
// to +inf; NaN stays NaN.
constexpr float kExpLo = -104.0f;
constexpr float kExpHi = 89.0f;
constexpr float kLog2e = 0x1.715476p+0f;
constexpr float kShift = 0x1.8p23f;  // t = x log2e + kShift: n in t's low mantissa bits
constexpr int32_t kShiftBits = 0x4b400000;
constexpr float kNegLn2Hi = -0x1.62e430p-1f;
constexpr float kNegLn2Lo = 0x1.05c610p-29f;
constexpr float kC2 = 0x1.000000p-1f;
constexpr float kC3 = 0x1.5554dep-3f;
constexpr float kC4 = 0x1.55551ap-5f;
constexpr float kC5 = 0x1.120b62p-7f;
constexpr float kC6 = 0x1.6d10fcp-10f;

template <class L>
[[gnu::always_inline]] inline typename L::F exp_lanes(typename L::F x) {
  using F = typename L::F;
  using I = typename L::I;
  x = L::min(L::set1(kExpHi), L::max(L::set1(kExpLo), x));
  const F t = L::fma(x, L::set1(kLog2e), L::set1(kShift));
  const F nf = L::sub(t, L::set1(kShift));
  const I n = L::sub_i(L::bits(t), L::set1_i(kShiftBits));
  F r = L::fma(nf, L::set1(kNegLn2Hi), x);
  r = L::fma(nf, L::set1(kNegLn2Lo), r);
  F p = L::fma(L::set1(kC6), r, L::set1(kC5));
  p = L::fma(p, r, L::set1(kC4));
  p = L::fma(p, r, L::set1(kC3));
  p = L::fma(p, r, L::set1(kC2));
  p = L::fma(p, r, L::set1(1.0f));
  p = L::fma(p, r, L::set1(1.0f));
  const I n1 = L::half_i(n);
  const I n2 = L::sub_i(n, n1);
  const F s1 = L::from_bits(L::exponent_i(L::add_i(n1, L::set1_i(127))));
  const F s2 = L::from_bits(L::exponent_i(L::add_i(n2, L::set1_i(127))));
  return L::mul(L::mul(p, s1), s2);
}

// 1 / (1 + e^-x).
template <class L>
[[gnu::always_inline]] inline typename L::F sigmoid_lanes(typename L::F x) {
  const typename L::F one = L::set1(1.0f);
  return L::div(one, L::add(one, exp_lanes<L>(L::sub(L::set1(0.0f), x))));
}

// g / (1 + e^-g) * u.
template <class L>
[[gnu::always_inline]] inline typename L::F silu_mul_lanes(typename L::F g, typename L::F u) {
  const typename L::F d = L::add(L::set1(1.0f), exp_lanes<L>(L::sub(L::set1(0.0f), g)));
  return L::mul(L::div(g, d), u);
}

// GPT-OSS's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit) (a NaN passes
// through both, as std::min and std::clamp let it), then g / (1 + e^(-alpha g)) * (u + 1).
template <class L>
[[gnu::always_inline]] inline typename L::F swiglu_oai_lanes(typename L::F gate, typename L::F up,
                                                             float alpha, float limit) {
  const typename L::F one = L::set1(1.0f);
  const typename L::F g = L::min(L::set1(limit), gate);
  const typename L::F u = L::min(L::set1(limit), L::max(L::set1(-limit), up));
  const typename L::F d = L::add(one, exp_lanes<L>(L::mul(L::set1(-alpha), g)));
  return L::mul(L::div(g, d), L::add(u, one));
}

}  // namespace
}  // namespace tandem::kernels::detail
