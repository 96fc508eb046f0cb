// Activation quantizers (Q8_0, Q8_K) and the views of QuantizedActivations.
#include "kernels/cpu/activation_rows.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "kernels/cpu/activation_quantize.h"
#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/matmul_dispatch.h"

#ifdef TANDEM_MATMUL_X86
#define TANDEM_QUANTIZER(name) detail::name##_avx2
#else
#define TANDEM_QUANTIZER(name) detail::name##_scalar
#endif

namespace tandem::kernels {
namespace detail {

void quantize_row_q8_0_scalar(const float* x, size_t cols, int8_t* qs, float* d) {
  for (size_t b = 0; b < cols / kQ8_0BlockElements; ++b) {
    const float* src = x + b * kQ8_0BlockElements;
    int8_t* q = qs + b * kQ8_0BlockElements;
    float amax = 0.0f;
    for (size_t j = 0; j < kQ8_0BlockElements; ++j) amax = std::fmax(amax, std::fabs(src[j]));
    const float scale = amax / 127.0f;
    const float id = scale != 0.0f ? 1.0f / scale : 0.0f;
    for (size_t j = 0; j < kQ8_0BlockElements; ++j) {
      // |src * id| <= 127 up to rounding; NaN (from NaN or infinite input) becomes 0 rather than
      // an undefined conversion.
      const float r = std::round(src[j] * id);
      q[j] = static_cast<int8_t>(std::isnan(r) ? 0.0f : std::clamp(r, -127.0f, 127.0f));
    }
    d[b] = fp16_to_fp32(fp32_to_fp16_bits(scale));
  }
}

void quantize_row_q8_k_scalar(const float* x, size_t cols, int8_t* qs, float* d, int16_t* bsums) {
  for (size_t b = 0; b < cols / kQ8_KBlockElements; ++b) {
    const float* src = x + b * kQ8_KBlockElements;
    int8_t* q = qs + b * kQ8_KBlockElements;
    float amax = 0.0f;
    float max = 0.0f;
    for (size_t j = 0; j < kQ8_KBlockElements; ++j) {
      const float ax = std::fabs(src[j]);
      if (ax > amax) {
        amax = ax;
        max = src[j];
      }
    }
    int16_t* sums = bsums + b * (kQ8_KBlockElements / kQ8_KSumElements);
    if (amax == 0.0f || !std::isfinite(amax)) {
      std::memset(q, 0, kQ8_KBlockElements);
      std::fill_n(sums, kQ8_KBlockElements / kQ8_KSumElements, int16_t{0});
      d[b] = 0.0f;
      continue;
    }
    const float iscale = -127.0f / max;
    for (size_t j = 0; j < kQ8_KBlockElements; ++j) {
      // nearbyint rounds ties to even in the default mode, as ggml's nearest_int does.
      const float r = std::nearbyint(iscale * src[j]);
      q[j] = static_cast<int8_t>(std::isnan(r) ? 0.0f : std::clamp(r, -128.0f, 127.0f));
    }
    for (size_t g = 0; g < kQ8_KBlockElements / kQ8_KSumElements; ++g) {
      int sum = 0;
      for (size_t j = 0; j < kQ8_KSumElements; ++j) sum += q[g * kQ8_KSumElements + j];
      sums[g] = static_cast<int16_t>(sum);
    }
    d[b] = 1.0f / iscale;
  }
}

}  // namespace detail

namespace {

// The AVX2 quantizers where this build has them and the active matmul variant is not the scalar
// reference (TANDEM_CPU_KERNELS=scalar keeps every kernel on the reference).
bool simd_quantizers() {
#ifdef TANDEM_MATMUL_X86
  return active_matmul_variant() != MatmulVariant::kScalar;
#else
  return false;
#endif
}

}  // namespace

std::string_view activation_format_name(ActivationFormat f) {
  switch (f) {
    case ActivationFormat::kF32:
      return "f32";
    case ActivationFormat::kQ8_0:
      return "q8_0";
    case ActivationFormat::kQ8_K:
      return "q8_K";
    case ActivationFormat::kBF16:
      return "bf16";
  }
  return "unknown";
}

size_t activation_block_elements(ActivationFormat f) {
  switch (f) {
    case ActivationFormat::kF32:
      return 1;
    case ActivationFormat::kQ8_0:
      return kQ8_0BlockElements;
    case ActivationFormat::kQ8_K:
      return kQ8_KBlockElements;
    case ActivationFormat::kBF16:
      return 1;
  }
  return 1;
}

ActivationRows view_of(const QuantizedActivations& a) {
  return view_of(a, 0, a.n_tokens);
}

ActivationRows view_of(const QuantizedActivations& a, size_t t0, size_t t1) {
  ActivationRows all;
  all.format = a.format;
  all.n_tokens = a.n_tokens;
  all.cols = a.cols;
  if (a.format == ActivationFormat::kF32) {
    all.f32 = a.f32.data();
  } else if (a.format == ActivationFormat::kBF16) {
    all.bf16 = a.bf16.data();
  } else {
    all.qs = a.qs.data();
    all.d = a.d.data();
    if (a.format == ActivationFormat::kQ8_K) all.bsums = a.bsums.data();
  }
  return row_range(all, t0, t1);
}

ActivationRows row_range(const ActivationRows& a, size_t t0, size_t t1) {
  TANDEM_CHECK(t0 <= t1 && t1 <= a.n_tokens);
  ActivationRows v = a;
  v.n_tokens = t1 - t0;
  const size_t cols = a.cols;
  if (v.f32 != nullptr) v.f32 += t0 * cols;
  if (v.qs != nullptr) v.qs += t0 * cols;
  if (v.d != nullptr) v.d += t0 * (cols / activation_block_elements(a.format));
  if (v.bsums != nullptr) v.bsums += t0 * (cols / kQ8_KSumElements);
  if (v.bf16 != nullptr) v.bf16 += t0 * cols;
  return v;
}

void quantize_activations_resize(ActivationFormat f, size_t n_tokens, size_t cols,
                                 QuantizedActivations& out) {
  const size_t block = activation_block_elements(f);
  TANDEM_CHECK(cols % block == 0);
  out.format = f;
  out.n_tokens = n_tokens;
  out.cols = cols;
  const size_t n = n_tokens * cols;
  if (f == ActivationFormat::kF32) {
    if (out.f32.size() < n) out.f32.resize(n);
    return;
  }
  if (f == ActivationFormat::kBF16) {
    if (out.bf16.size() < n) out.bf16.resize(n);
    return;
  }
  if (out.qs.size() < n) out.qs.resize(n);
  if (out.d.size() < n / block) out.d.resize(n / block);
  if (f == ActivationFormat::kQ8_K && out.bsums.size() < n / kQ8_KSumElements) {
    out.bsums.resize(n / kQ8_KSumElements);
  }
}

void quantize_activation_rows(std::span<const float> x, size_t t0, size_t t1,
                              QuantizedActivations& out) {
  TANDEM_CHECK(t0 <= t1 && t1 <= out.n_tokens && x.size() >= out.n_tokens * out.cols);
  const size_t cols = out.cols;
  const bool simd = simd_quantizers();
  const auto q8_0 = simd ? TANDEM_QUANTIZER(quantize_row_q8_0) : detail::quantize_row_q8_0_scalar;
  const auto q8_k = simd ? TANDEM_QUANTIZER(quantize_row_q8_k) : detail::quantize_row_q8_k_scalar;
  for (size_t t = t0; t < t1; ++t) {
    const float* row = x.data() + t * cols;
    switch (out.format) {
      case ActivationFormat::kF32:
        std::memcpy(out.f32.data() + t * cols, row, cols * sizeof(float));
        break;
      case ActivationFormat::kQ8_0:
        q8_0(row, cols, out.qs.data() + t * cols, out.d.data() + t * (cols / kQ8_0BlockElements));
        break;
      case ActivationFormat::kQ8_K:
        q8_k(row, cols, out.qs.data() + t * cols, out.d.data() + t * (cols / kQ8_KBlockElements),
             out.bsums.data() + t * (cols / kQ8_KSumElements));
        break;
      case ActivationFormat::kBF16: {
        uint16_t* dst = out.bf16.data() + t * cols;
        for (size_t i = 0; i < cols; ++i)
          dst[i] = fp32_to_bf16_bits(std::bit_cast<uint32_t>(row[i]));
        break;
      }
    }
  }
}

void quantize_activations(ActivationFormat f, std::span<const float> x, size_t n_tokens,
                          size_t cols, QuantizedActivations& out) {
  TANDEM_CHECK(x.size() == n_tokens * cols);
  quantize_activations_resize(f, n_tokens, cols, out);
  quantize_activation_rows(x, 0, n_tokens, out);
}

void copy_activation_row(const QuantizedActivations& src, size_t src_row, QuantizedActivations& dst,
                         size_t dst_row) {
  TANDEM_CHECK(src.format == dst.format && src.cols == dst.cols);
  TANDEM_CHECK(src_row < src.n_tokens && dst_row < dst.n_tokens);
  const size_t cols = src.cols;
  if (src.format == ActivationFormat::kF32) {
    std::memcpy(dst.f32.data() + dst_row * cols, src.f32.data() + src_row * cols,
                cols * sizeof(float));
    return;
  }
  if (src.format == ActivationFormat::kBF16) {
    std::memcpy(dst.bf16.data() + dst_row * cols, src.bf16.data() + src_row * cols,
                cols * sizeof(uint16_t));
    return;
  }
  std::memcpy(dst.qs.data() + dst_row * cols, src.qs.data() + src_row * cols, cols);
  const size_t nd = cols / activation_block_elements(src.format);
  std::memcpy(dst.d.data() + dst_row * nd, src.d.data() + src_row * nd, nd * sizeof(float));
  if (src.format == ActivationFormat::kQ8_K) {
    const size_t ns = cols / kQ8_KSumElements;
    std::memcpy(dst.bsums.data() + dst_row * ns, src.bsums.data() + src_row * ns,
                ns * sizeof(int16_t));
  }
}

uint16_t fp32_to_fp16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  // 65520 (0x477ff000) is half-way between the largest half 65504 and 65536: ties to even -> inf.
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (ax < 0x38800000u) {
    // Below the smallest normal half (2^-14): a multiple of 2^-24. Scaling by 2^24 is exact and
    // nearbyint rounds ties to even in the default rounding mode; 1024 yields the smallest normal.
    const float scaled = std::bit_cast<float>(ax) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  // Normal: re-bias the exponent (127 -> 15) and round the 13 dropped mantissa bits to even; a
  // carry out of the mantissa correctly bumps the exponent.
  const uint32_t rebased = ax - 0x38000000u;
  return static_cast<uint16_t>(sign | ((rebased + 0xfffu + ((ax >> 13) & 1u)) >> 13));
}

}  // namespace tandem::kernels
