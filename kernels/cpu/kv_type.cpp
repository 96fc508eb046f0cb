// The KV element conversions, with the F16C variants chosen at run time.
#include "kernels/cpu/kv_type.h"

#include <cstring>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/float_convert.h"

namespace tandem::kernels {
namespace {

struct Fp16Kernels {
  decltype(&detail::fp32_to_fp16_scalar) store;
  decltype(&detail::fp16_to_fp32_scalar) load;
};

const Fp16Kernels& fp16_kernels() {
#ifdef TANDEM_MATMUL_X86
  const CpuFeatures& f = cpu_features();
  static const Fp16Kernels kernels =
      f.avx && f.f16c ? Fp16Kernels{detail::fp32_to_fp16_f16c, detail::fp16_to_fp32_f16c}
                      : Fp16Kernels{detail::fp32_to_fp16_scalar, detail::fp16_to_fp32_scalar};
#else
  static const Fp16Kernels kernels{detail::fp32_to_fp16_scalar, detail::fp16_to_fp32_scalar};
#endif
  return kernels;
}

}  // namespace

void store_kv_elements(KvType type, const float* src, void* dst, size_t n) {
  if (type == KvType::kF32) {
    std::memcpy(dst, src, n * sizeof(float));
  } else {
    fp16_kernels().store(src, static_cast<uint16_t*>(dst), n);
  }
}

void load_kv_elements(KvType type, const void* src, float* dst, size_t n) {
  if (type == KvType::kF32) {
    std::memcpy(dst, src, n * sizeof(float));
  } else {
    fp16_kernels().load(static_cast<const uint16_t*>(src), dst, n);
  }
}

namespace detail {

void fp32_to_fp16_scalar(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16_bits(src[i]);
}

void fp16_to_fp32_scalar(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

}  // namespace detail
}  // namespace tandem::kernels
