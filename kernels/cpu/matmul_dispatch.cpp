// The scalar MatmulKernels table and the run-time choice between it and the SIMD tables.
#include "kernels/cpu/matmul_dispatch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <spdlog/spdlog.h>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/matmul_kernels.h"
#include "kernels/cpu/vector_ops.h"

namespace tandem::kernels {
namespace detail {
namespace {

bool scalar_to_float(TensorType, const uint8_t*, size_t, float*) {
  return false;  // dequantize() is the scalar conversion
}

void scalar_dot_rows(const float* x, size_t n_tokens, const float* w, size_t rows, size_t cols,
                     float* y, size_t y_stride) {
  for (size_t t = 0; t < n_tokens; ++t) {
    for (size_t r = 0; r < rows; ++r)
      y[t * y_stride + r] = dot_f32(x + t * cols, w + r * cols, cols);
  }
}

bool scalar_dot_rows_direct(TensorType, const uint8_t*, size_t, const float*, size_t, size_t,
                            size_t, float*, size_t) {
  return false;  // the scalar path converts tiles through dequantize()
}

}  // namespace

const MatmulKernels& matmul_kernels_scalar() {
  static const MatmulKernels kernels{"scalar", scalar_to_float, scalar_dot_rows,
                                     scalar_dot_rows_direct};
  return kernels;
}

}  // namespace detail

namespace {

const detail::MatmulKernels& table_of(MatmulVariant v) {
#ifdef TANDEM_MATMUL_X86
  switch (v) {
    case MatmulVariant::kAvx2:
      return detail::matmul_kernels_avx2();
    case MatmulVariant::kAvx512:
      return detail::matmul_kernels_avx512();
    case MatmulVariant::kAvx512Vnni:
    case MatmulVariant::kAmx:  // the float paths have no AMX kernels of their own
      return detail::matmul_kernels_avx512_vnni();
    case MatmulVariant::kScalar:
      break;
  }
#else
  (void)v;
#endif
  return detail::matmul_kernels_scalar();
}

// The best supported variant at or below v (kAmx > kAvx512Vnni > kAvx512 > kAvx2 > kScalar).
MatmulVariant fall_back(MatmulVariant v) {
  while (!matmul_variant_supported(v)) v = static_cast<MatmulVariant>(static_cast<int>(v) - 1);
  return v;
}

struct Active {
  std::atomic<MatmulVariant> variant;
  std::atomic<const detail::MatmulKernels*> table;
  Active() {
    const MatmulVariant v = best_matmul_variant();
    variant.store(v);
    table.store(&table_of(v));
  }
};

Active& active() {
  static Active a;
  return a;
}

}  // namespace

std::string_view matmul_variant_name(MatmulVariant v) {
  switch (v) {
    case MatmulVariant::kScalar:
      return "scalar";
    case MatmulVariant::kAvx2:
      return "avx2";
    case MatmulVariant::kAvx512:
      return "avx512";
    case MatmulVariant::kAvx512Vnni:
      return "avx512-vnni";
    case MatmulVariant::kAmx:
      return "amx";
  }
  return "unknown";
}

bool matmul_variant_supported(MatmulVariant v) {
#ifdef TANDEM_MATMUL_X86
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  const bool avx512 = avx2 && f.avx512f && f.avx512bw && f.avx512vl;
  switch (v) {
    case MatmulVariant::kScalar:
      return true;
    case MatmulVariant::kAvx2:
      return avx2;
    case MatmulVariant::kAvx512:
      return avx512;
    case MatmulVariant::kAvx512Vnni:
      return avx512 && f.avx512_vnni;
    case MatmulVariant::kAmx:
      return avx512 && f.avx512_vnni && f.amx_tile && f.amx_int8;
  }
  return false;
#else
  return v == MatmulVariant::kScalar;
#endif
}

MatmulVariant best_matmul_variant() {
  return fall_back(MatmulVariant::kAmx);
}

MatmulVariant matmul_variant_for_setting(const char* setting) {
  if (setting == nullptr) return best_matmul_variant();
  const std::string_view name(setting);
  if (name == "scalar") return MatmulVariant::kScalar;
  if (name == "avx2") return fall_back(MatmulVariant::kAvx2);
  if (name == "avx512") return fall_back(MatmulVariant::kAvx512Vnni);
  if (name == "amx") return fall_back(MatmulVariant::kAmx);
  return best_matmul_variant();
}

MatmulVariant select_matmul_kernels(std::string_view setting, std::string_view source) {
  if (setting.empty() || setting == "auto") return set_matmul_variant(best_matmul_variant());
  const std::string name(setting);
  const MatmulVariant v = set_matmul_variant(matmul_variant_for_setting(name.c_str()));
  if (setting != "scalar" && setting != "avx2" && setting != "avx512" && setting != "amx") {
    spdlog::warn("{}='{}' is not one of auto, scalar, avx2, avx512, amx: using {}", source, setting,
                 matmul_variant_name(v));
  } else if (setting != "scalar" && !setting.starts_with(matmul_variant_name(v).substr(0, 4))) {
    spdlog::warn("{}={}: this CPU cannot run it; using {}", source, setting,
                 matmul_variant_name(v));
  }
  return v;
}

MatmulVariant active_matmul_variant() {
  return active().variant.load(std::memory_order_relaxed);
}

std::string_view active_matmul_variant_name() {
  return matmul_variant_name(active_matmul_variant());
}

MatmulVariant set_matmul_variant(MatmulVariant v) {
  const MatmulVariant chosen = fall_back(v);
  Active& a = active();
  a.variant.store(chosen);
  a.table.store(&table_of(chosen));
  return chosen;
}

namespace detail {

// Used by matmul.cpp (declared there): the table of the active variant.
const MatmulKernels& active_matmul_kernels() {
  return *active().table.load(std::memory_order_acquire);
}

}  // namespace detail
}  // namespace tandem::kernels
