// The element-wise and row kernels: scalar references, and the run-time choice of the exp row
// kernels' variant (exp_rows.h).
#include "kernels/cpu/vector_ops.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "kernels/cpu/exp_rows.h"
#include "kernels/cpu/matmul_dispatch.h"

namespace tandem::kernels {
namespace {

// The exp row kernels (exp_rows.h) of the active matmul variant: AVX-512 for the AVX-512 and AMX
// variants, AVX2 for AVX2, the scalar references otherwise (TANDEM_CPU_KERNELS=scalar keeps them).
struct ExpRowKernels {
  decltype(&detail::softmax_scalar) softmax;
  decltype(&detail::sigmoid_scalar) sigmoid;
  decltype(&detail::silu_mul_scalar) silu_mul;
  decltype(&detail::swiglu_oai_scalar) swiglu_oai;
};

const ExpRowKernels& exp_row_kernels() {
  static constexpr ExpRowKernels kScalar{detail::softmax_scalar, detail::sigmoid_scalar,
                                         detail::silu_mul_scalar, detail::swiglu_oai_scalar};
#ifdef TANDEM_MATMUL_X86
  static constexpr ExpRowKernels kAvx2{detail::softmax_avx2, detail::sigmoid_avx2,
                                       detail::silu_mul_avx2, detail::swiglu_oai_avx2};
  static constexpr ExpRowKernels kAvx512{detail::softmax_avx512, detail::sigmoid_avx512,
                                         detail::silu_mul_avx512, detail::swiglu_oai_avx512};
  switch (active_matmul_variant()) {
    case MatmulVariant::kScalar:
      return kScalar;
    case MatmulVariant::kAvx2:
      return kAvx2;
    case MatmulVariant::kAvx512:
    case MatmulVariant::kAvx512Vnni:
    case MatmulVariant::kAmx:
      return kAvx512;
  }
#endif
  return kScalar;
}

}  // namespace

float dot_f32(const float* a, const float* b, size_t n) {
  float acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (size_t k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  }
  for (; i < n; ++i) acc[i % 8] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void softmax(std::span<float> row, std::optional<float> sink) {
  TANDEM_CHECK(!row.empty());
  exp_row_kernels().softmax(row.data(), row.size(), sink ? &*sink : nullptr);
}

void sigmoid(std::span<const float> x, std::span<float> out) {
  TANDEM_CHECK(x.size() == out.size());
  exp_row_kernels().sigmoid(x.data(), x.size(), out.data());
}

void silu_mul(std::span<const float> gate, std::span<const float> up, std::span<float> out) {
  TANDEM_CHECK(gate.size() == up.size() && out.size() == gate.size());
  exp_row_kernels().silu_mul(gate.data(), up.data(), gate.size(), out.data());
}

void swiglu_oai_mul(std::span<const float> gate, std::span<const float> up, std::span<float> out,
                    float alpha, float limit) {
  TANDEM_CHECK(gate.size() == up.size() && out.size() == gate.size());
  exp_row_kernels().swiglu_oai(gate.data(), up.data(), gate.size(), alpha, limit, out.data());
}

void add(std::span<const float> a, std::span<const float> b, std::span<float> out) {
  TANDEM_CHECK(a.size() == b.size() && out.size() == a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
}

void scale(std::span<float> x, float s) {
  for (float& v : x) v *= s;
}

void add_scaled(std::span<float> acc, std::span<const float> x, float s) {
  TANDEM_CHECK(acc.size() == x.size());
  for (size_t i = 0; i < acc.size(); ++i) acc[i] += s * x[i];
}

}  // namespace tandem::kernels
