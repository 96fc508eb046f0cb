// CPUID/XGETBV probing for runtime SIMD dispatch (x86-64; other architectures report nothing).
#include "kernels/cpu/cpu_features.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define TANDEM_X86 1
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tandem::kernels {

namespace {

#ifdef TANDEM_X86
struct Regs {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs cpuid(uint32_t leaf, uint32_t subleaf) {
  Regs r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool bit(uint32_t v, int n) {
  return (v >> n) & 1u;
}

// Linux (5.16 on) enables the AMX tile data state per process only on request; without the
// permission the first tile instruction raises SIGILL. The permission is process-wide, so asking
// once here, before any kernel runs, covers every thread. Other systems: whatever XCR0 says.
bool os_permits_amx_tiles() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kArchReqXcompPerm = 0x1023;  // ARCH_REQ_XCOMP_PERM
  constexpr long kXfeatureXtiledata = 18;     // XFEATURE_XTILEDATA
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return true;
#endif
}

CpuIdentity probe_identity() {
  CpuIdentity id;
  const uint32_t max_leaf = __get_cpuid_max(0, nullptr);
  const Regs l0 = cpuid(0, 0);
  char vendor[13] = {};
  std::memcpy(vendor, &l0.ebx, 4);
  std::memcpy(vendor + 4, &l0.edx, 4);
  std::memcpy(vendor + 8, &l0.ecx, 4);
  id.vendor = vendor;
  if (max_leaf >= 1) decode_cpu_signature(cpuid(1, 0).eax, id);
  if (__get_cpuid_max(0x80000000u, nullptr) >= 0x80000004u) {
    char brand[49] = {};
    for (uint32_t i = 0; i < 3; ++i) {
      const Regs r = cpuid(0x80000002u + i, 0);
      std::memcpy(brand + 16 * i, &r.eax, 4);
      std::memcpy(brand + 16 * i + 4, &r.ebx, 4);
      std::memcpy(brand + 16 * i + 8, &r.ecx, 4);
      std::memcpy(brand + 16 * i + 12, &r.edx, 4);
    }
    std::string b = brand;
    const size_t first = b.find_first_not_of(' ');
    const size_t last = b.find_last_not_of(' ');
    id.brand = first == std::string::npos ? "" : b.substr(first, last - first + 1);
  }
  return id;
}

CpuFeatures probe() {
  CpuFeatures f;
  const uint32_t max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 1) return f;
  const Regs l1 = cpuid(1, 0);
  f.sse42 = bit(l1.ecx, 20);
  const bool osxsave = bit(l1.ecx, 27);
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_ymm = (xcr0 & 0x6) == 0x6;              // XMM and YMM state
  const bool os_zmm = os_ymm && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;      // XTILECFG and XTILEDATA
  f.avx = bit(l1.ecx, 28) && os_ymm;
  f.fma = bit(l1.ecx, 12) && os_ymm;
  f.f16c = bit(l1.ecx, 29) && os_ymm;
  if (max_leaf >= 7) {
    const Regs l7 = cpuid(7, 0);
    f.avx2 = bit(l7.ebx, 5) && os_ymm;
    f.avx512f = bit(l7.ebx, 16) && os_zmm;
    f.avx512bw = bit(l7.ebx, 30) && os_zmm;
    f.avx512vl = bit(l7.ebx, 31) && os_zmm;
    f.avx512_vnni = bit(l7.ecx, 11) && os_zmm;
    f.avx512_vbmi = bit(l7.ecx, 1) && os_zmm;
    f.amx_bf16 = bit(l7.edx, 22) && os_amx;
    f.amx_tile = bit(l7.edx, 24) && os_amx;
    f.amx_int8 = bit(l7.edx, 25) && os_amx;
    if (f.amx_tile && !os_permits_amx_tiles()) f.amx_tile = f.amx_int8 = f.amx_bf16 = false;
    if (l7.eax >= 1) {
      const Regs l71 = cpuid(7, 1);
      f.avx512_bf16 = bit(l71.eax, 5) && os_zmm;
    }
  }
  return f;
}
#else
CpuIdentity probe_identity() {
  return CpuIdentity{};
}

CpuFeatures probe() {
  return CpuFeatures{};
}
#endif

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = probe();
  return features;
}

const CpuIdentity& cpu_identity() {
  static const CpuIdentity identity = probe_identity();
  return identity;
}

void decode_cpu_signature(uint32_t eax, CpuIdentity& id) {
  const uint32_t base_family = (eax >> 8) & 0xf;
  const uint32_t base_model = (eax >> 4) & 0xf;
  id.stepping = eax & 0xf;
  id.family = base_family == 0xf ? base_family + ((eax >> 20) & 0xff) : base_family;
  id.model = base_family == 0x6 || base_family == 0xf ? (((eax >> 16) & 0xf) << 4) + base_model
                                                      : base_model;
}

std::string cpu_identity_string(const CpuIdentity& id) {
  if (id.vendor.empty() && id.brand.empty()) return "unknown";
  // The vendor in the parentheses only when the brand string is the name in front.
  std::string out = id.brand.empty() ? id.vendor : id.brand;
  out += " (";
  if (!id.brand.empty()) out += (id.vendor.empty() ? "unknown vendor" : id.vendor) + " ";
  out += "family " + std::to_string(id.family) + " model " + std::to_string(id.model) +
         " stepping " + std::to_string(id.stepping) + ")";
  return out;
}

std::string cpu_features_string(const CpuFeatures& f) {
  std::string out;
  const auto add = [&out](bool on, const char* name) {
    if (!on) return;
    if (!out.empty()) out += ' ';
    out += name;
  };
  add(f.sse42, "sse4.2");
  add(f.avx, "avx");
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512_vnni, "avx512vnni");
  add(f.avx512_bf16, "avx512bf16");
  add(f.avx512_vbmi, "avx512vbmi");
  add(f.amx_tile, "amx-tile");
  add(f.amx_int8, "amx-int8");
  add(f.amx_bf16, "amx-bf16");
  if (out.empty()) out = "none";
  return out;
}

}  // namespace tandem::kernels
