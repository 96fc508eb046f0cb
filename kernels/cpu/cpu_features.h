// CpuFeatures: what SIMD the running CPU and OS support, read once from CPUID/XGETBV.
#pragma once

#include <cstdint>
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

// Which CPU this is, beside every speed figure: two machines with the same features (a first- and
// a third-generation Zen EPYC both print "sse4.2 avx avx2 fma f16c") run the same kernels at very
// different rates. Family, model and stepping are CPUID leaf 1's, decoded as Intel's and AMD's
// manuals do; the brand string is leaves 0x80000002-4 (a VM may shorten it, e.g. "AMD EPYC").
struct CpuIdentity {
  std::string vendor;  // "AuthenticAMD", "GenuineIntel"; empty off x86
  std::string brand;
  uint32_t family = 0;
  uint32_t model = 0;
  uint32_t stepping = 0;
};

// This CPU's identity (read once).
const CpuIdentity& cpu_identity();

// Sets id's family, model and stepping from CPUID leaf 1's EAX: the extended family counts only
// for base family 15, the extended model only for base families 6 and 15.
void decode_cpu_signature(uint32_t eax, CpuIdentity& id);

// "AMD EPYC (AuthenticAMD family 25 model 1 stepping 1)"; without a brand string the vendor
// leads: "AuthenticAMD (family 25 model 1 stepping 1)"; "unknown" with nothing known.
std::string cpu_identity_string(const CpuIdentity& id);

}  // namespace tandem::kernels
