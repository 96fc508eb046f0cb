// Tests of CPU feature probing against the kernel's own view in /proc/cpuinfo.
#include "kernels/cpu/cpu_features.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace tandem::kernels {
namespace {

// The value of the first "NAME : value" line of /proc/cpuinfo; empty where there is none.
std::string proc_cpuinfo_value(const std::string& name) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    if (key == name) return line.substr(colon + 2 <= line.size() ? colon + 2 : line.size());
  }
  return {};
}

// The "flags" of the first processor in /proc/cpuinfo; empty where there is none.
std::set<std::string> proc_cpuinfo_flags() {
  std::istringstream words(proc_cpuinfo_value("flags"));
  std::set<std::string> flags;
  std::string w;
  while (words >> w) flags.insert(w);
  return flags;
}

TEST_CASE("cpu_features agrees with the flags Linux reports", "[kernels]") {
  const std::set<std::string> flags = proc_cpuinfo_flags();
  if (flags.empty()) {
    WARN("no /proc/cpuinfo flags on this machine: case skipped");
    return;
  }
  const CpuFeatures& f = cpu_features();
  // Linux lists a flag only when the OS supports the state, the same rule cpu_features applies.
  CHECK(f.avx2 == (flags.count("avx2") == 1));
  CHECK(f.fma == (flags.count("fma") == 1));
  CHECK(f.f16c == (flags.count("f16c") == 1));
  CHECK(f.avx512f == (flags.count("avx512f") == 1));
  CHECK(f.avx512bw == (flags.count("avx512bw") == 1));
  CHECK(f.avx512_vnni == (flags.count("avx512_vnni") == 1));
  CHECK(f.avx512_bf16 == (flags.count("avx512_bf16") == 1));
  CHECK(f.amx_tile == (flags.count("amx_tile") == 1));
  CHECK(f.amx_int8 == (flags.count("amx_int8") == 1));
}

TEST_CASE("decode_cpu_signature follows the vendors' family and model rules", "[kernels]") {
  // CPUID leaf 1 EAX of known parts: (signature, family, model, stepping).
  struct Known {
    uint32_t eax;
    uint32_t family, model, stepping;
  };
  const Known known[] = {
      {0x00800f12, 23, 1, 2},   // first-generation Zen EPYC (Naples)
      {0x00a00f11, 25, 1, 1},   // third-generation Zen EPYC (Milan)
      {0x00a10f11, 25, 17, 1},  // fourth-generation Zen EPYC (Genoa)
      {0x000806f8, 6, 143, 8},  // Xeon Sapphire Rapids: extended model with family 6
      {0x00050654, 6, 85, 4},   // Xeon Skylake-SP
      {0x00000f29, 15, 2, 9},   // Pentium 4: family 15, extended family 0
      {0x00000543, 5, 4, 3},    // Pentium MMX: no extended fields
  };
  for (const Known& k : known) {
    INFO(std::hex << k.eax);
    CpuIdentity id;
    decode_cpu_signature(k.eax, id);
    CHECK(id.family == k.family);
    CHECK(id.model == k.model);
    CHECK(id.stepping == k.stepping);
  }
}

TEST_CASE("cpu_identity agrees with the family and model Linux reports", "[kernels]") {
  const std::string family = proc_cpuinfo_value("cpu family");
  const std::string model = proc_cpuinfo_value("model");
  if (family.empty() || model.empty()) {
    WARN("no x86 cpu family / model in /proc/cpuinfo: case skipped");
    return;
  }
  const CpuIdentity& id = cpu_identity();
  CHECK(std::to_string(id.family) == family);
  CHECK(std::to_string(id.model) == model);
  CHECK_FALSE(id.vendor.empty());
  const std::string text = cpu_identity_string(id);
  CHECK(text.find("family " + family + " model " + model) != std::string::npos);
}

TEST_CASE("cpu_identity_string names the part, or says it is unknown", "[kernels]") {
  CHECK(cpu_identity_string(CpuIdentity{}) == "unknown");
  CpuIdentity id;
  id.vendor = "AuthenticAMD";
  id.brand = "AMD EPYC";
  decode_cpu_signature(0x00a00f11, id);
  CHECK(cpu_identity_string(id) == "AMD EPYC (AuthenticAMD family 25 model 1 stepping 1)");
  id.brand.clear();
  CHECK(cpu_identity_string(id) == "AuthenticAMD (family 25 model 1 stepping 1)");
}

TEST_CASE("cpu_features_string names the enabled features", "[kernels]") {
  CpuFeatures f;
  CHECK(cpu_features_string(f) == "none");
  f.avx2 = true;
  f.amx_int8 = true;
  CHECK(cpu_features_string(f) == "avx2 amx-int8");
}

}  // namespace
}  // namespace tandem::kernels
