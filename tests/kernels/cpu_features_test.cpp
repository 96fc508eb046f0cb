// Tests of CPU feature probing against the kernel's own view in /proc/cpuinfo.
#include "kernels/cpu/cpu_features.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace tandem::kernels {
namespace {

// The "flags" of the first processor in /proc/cpuinfo; empty where there is none.
std::set<std::string> proc_cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      std::set<std::string> flags;
      std::string w;
      while (words >> w) flags.insert(w);
      return flags;
    }
  }
  return {};
}

TEST_CASE("cpu_features agrees with the flags Linux reports", "[kernels]") {
  const std::set<std::string> flags = proc_cpuinfo_flags();
  if (flags.empty()) {
    WARN("no /proc/cpuinfo flags on this machine; nothing to compare against");
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

TEST_CASE("cpu_features_string names the enabled features", "[kernels]") {
  CpuFeatures f;
  CHECK(cpu_features_string(f) == "none");
  f.avx2 = true;
  f.amx_int8 = true;
  CHECK(cpu_features_string(f) == "avx2 amx-int8");
}

}  // namespace
}  // namespace tandem::kernels
