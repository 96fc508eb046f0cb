// `tandem version`: version, revision and build options.
#include <cstdio>

#include "cli/commands.h"
#include "kernels/cpu/cpu_features.h"
#include "tandem/build_info.h"

namespace tandem::cli {

int run_version(std::span<char*> /*args*/) {
  std::printf("tandem %s (%s)\n", build_info::kVersion, build_info::kGitRevision);
  std::printf("build: %s, %s, cuda %s%s%s, sanitizer %s\n", build_info::kBuildType,
              build_info::kCompiler, build_info::kCudaEnabled ? "on" : "off",
              build_info::kCudaEnabled ? " arch " : "", build_info::kCudaArchitectures,
              build_info::kSanitizer[0] != '\0' ? build_info::kSanitizer : "none");
  std::printf("cpu: %s\n", kernels::cpu_features_string(kernels::cpu_features()).c_str());
  std::printf("cpu model: %s\n", kernels::cpu_identity_string(kernels::cpu_identity()).c_str());
  return 0;
}

}  // namespace tandem::cli
