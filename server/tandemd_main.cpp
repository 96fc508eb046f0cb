// tandemd: the Tandem daemon's entry point.
#include <cstdio>

#include "engine/base/log.h"
#include "kernels/cpu/cpu_features.h"
#include "tandem/build_info.h"

int main() {
  if (!tandem::configure_logging("info", tandem::LogFormat::kText).ok()) return 2;
  std::printf("tandemd %s (%s)\n", tandem::build_info::kVersion, tandem::build_info::kGitRevision);
  std::printf("cpu: %s\n",
              tandem::kernels::cpu_features_string(tandem::kernels::cpu_features()).c_str());
  std::fprintf(stderr, "tandemd: serving is not built yet\n");
  return 1;
}
