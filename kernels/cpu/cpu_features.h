// CpuFeatures: what SIMD the running CPU and OS support, read once from CPUID/XGETBV.
#pragma once

#include <string>

namespace tandem::kernels {

struct CpuFeatures {
  bool sse42 = false;
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool avx512_vbmi = false;  // vpermi2b: byte lookups in 128-entry tables
  bool amx_tile = false;
  bool amx_int8 = false;
  bool amx_bf16 = false;
};

// The features of this CPU, with the OS support for the register state (XCR0) taken into account:
// AVX-512 counts only when the OS saves ZMM state; AMX only when it enables tile state.
// Thread-safe; computed on first call.
const CpuFeatures& cpu_features();

// "avx2 fma f16c avx512f ..." — the enabled features, for the startup banner.
std::string cpu_features_string(const CpuFeatures& f);

}  // namespace tandem::kernels
