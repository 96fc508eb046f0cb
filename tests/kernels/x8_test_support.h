// Test helpers shared by the interleaved-layout kernel tests (quant_dot_kquants_x8_test.cpp,
// quant_dot_legacy_x8_test.cpp): one type's x8 kernels, its repack of a plain matrix, and every
// x8 kernel checked bit for bit against the plain scalar reference on a row range.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/matmul_dispatch.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/weight_type_table.h"
#include "tests/kernels/quant_dot_test_support.h"

namespace tandem::kernels::testing {

#if defined(__x86_64__) || defined(_M_X64)
#define TANDEM_X8_SIMD(fn) &detail::fn
#else
#define TANDEM_X8_SIMD(fn) nullptr
#endif

// One type with an interleaved layout: its plain scalar reference, its repack and its x8 kernels
// (the SIMD ones with the variant that runs them).
struct X8Kernels {
  const char* name;
  TensorType type;
  detail::QuantDotFn plain;
  detail::RepackFn repack;
  detail::InterleavedDotFn scalar_x8;
  std::vector<std::pair<MatmulVariant, detail::InterleavedDotFn>> simd_x8;
};

// The interleaved copy of `rows` plain rows of row_bytes each (padding included; bytes the repack
// leaves alone stay 0xa5).
inline std::vector<uint8_t> repacked(const X8Kernels& k, const std::vector<uint8_t>& w, size_t rows,
                                     size_t row_bytes) {
  std::vector<uint8_t> groups((rows + 7) / 8 * 8 * row_bytes, 0xa5);
  k.repack(w.data(), row_bytes, rows, groups.data());
  return groups;
}

struct NamedX8Kernel {
  std::string name;
  detail::InterleavedDotFn fn;
};

// The interleaved kernels to check: the scalar one and each SIMD one this CPU runs, whether or not
// the weight-type table uses it (it does where preferred_weight_layout measured faster).
inline std::vector<NamedX8Kernel> x8_kernels(const X8Kernels& k) {
  const WeightTypeKernels* row = weight_type_kernels(k.type);
  REQUIRE(row != nullptr);
  REQUIRE((k.repack == row->interleaved_x8.repack || k.repack == row->row_quads.repack));
  std::vector<NamedX8Kernel> out{{std::string(k.name) + " scalar", k.scalar_x8}};
  for (const auto& [variant, fn] : k.simd_x8) {
    if (fn == nullptr) continue;
    if (!matmul_variant_supported(variant)) {
      WARN(k.name << " x8 " << matmul_variant_name(variant)
                  << " kernel skipped: this CPU cannot run it");
      continue;
    }
    out.push_back({std::string(k.name) + " " + std::string(matmul_variant_name(variant)), fn});
  }
  return out;
}

// Every x8 kernel of k against the plain scalar reference on rows [row_begin, row_end) of `rows`
// plain rows w (row_bytes each): bit-identical, every result finite, nothing outside the written
// elements touched.
inline void check_x8_kernels(const X8Kernels& k, const std::vector<NamedX8Kernel>& kernels,
                             const std::vector<uint8_t>& w, size_t rows, size_t row_bytes,
                             size_t row_begin, size_t row_end, const ActivationRows& x) {
  const size_t n = row_end - row_begin;
  const size_t y_stride = n + 3;
  std::vector<float> want(x.n_tokens * y_stride, NAN);
  k.plain(w.data() + row_begin * row_bytes, row_bytes, n, x, want.data(), y_stride);
  const std::vector<uint8_t> g = repacked(k, w, rows, row_bytes);
  for (const NamedX8Kernel& kernel : kernels) {
    std::vector<float> got(x.n_tokens * y_stride, NAN);
    kernel.fn(g.data(), row_begin, row_end, x, got.data(), y_stride);
    size_t mismatches = 0;
    size_t touched = 0;
    size_t finite = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (i % y_stride < n) {
        mismatches += bits_of(got[i]) != bits_of(want[i]) ? 1 : 0;
        finite += std::isfinite(want[i]) ? 1 : 0;
      } else {
        touched += std::isnan(got[i]) ? 0 : 1;
      }
    }
    INFO(kernel.name << ": rows " << rows << " [" << row_begin << ", " << row_end << "), row bytes "
                     << row_bytes << ", tokens " << x.n_tokens);
    CHECK(mismatches == 0);
    CHECK(touched == 0);
    CHECK(finite == n * x.n_tokens);
  }
}

}  // namespace tandem::kernels::testing
