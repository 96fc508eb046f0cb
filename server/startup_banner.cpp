// The startup banner: build facts, CPU features, CUDA devices.
#include "server/startup_banner.h"

#include <spdlog/spdlog.h>

#include "engine/gpu/gpu_backend.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul_dispatch.h"
#include "tandem/build_info.h"

namespace tandem::server {

std::vector<std::string> build_banner_lines() {
  namespace bi = build_info;
  std::vector<std::string> lines;
  lines.push_back(std::string("tandemd ") + bi::kVersion + " (git " + bi::kGitRevision + ")");
  std::string cuda = "CUDA off";
  if (bi::kCudaEnabled) cuda = std::string("CUDA on, architectures ") + bi::kCudaArchitectures;
  const std::string sanitizer = *bi::kSanitizer == '\0' ? "none" : bi::kSanitizer;
  lines.push_back(std::string("build: ") + bi::kBuildType + ", " + bi::kCompiler + ", " + cuda +
                  ", sanitizer " + sanitizer);
  const std::string cpu = kernels::cpu_features_string(kernels::cpu_features());
  lines.push_back("cpu: " + kernels::cpu_identity_string(kernels::cpu_identity()) + "; " +
                  (cpu.empty() ? std::string("(no SIMD extensions)") : cpu) + "; matmul kernels " +
                  std::string(kernels::active_matmul_variant_name()) + " (runtime.cpu_kernels)");
  return lines;
}

void log_startup_banner() {
  for (const std::string& line : build_banner_lines()) spdlog::info("{}", line);
  if (!gpu::backend_built()) return;
  const Result<std::vector<gpu::DeviceInfo>> devices = gpu::list_devices();
  if (!devices.ok()) {
    spdlog::warn("cuda: cannot list devices: {}", devices.status().to_string());
    return;
  }
  if (devices->empty()) spdlog::warn("cuda: no devices visible; experts run on the CPU");
  for (const gpu::DeviceInfo& d : *devices) {
    spdlog::info("cuda: device {}: {}, {} MiB, compute capability {}.{}", d.index, d.name,
                 d.total_memory_bytes >> 20, d.compute_major, d.compute_minor);
  }
}

}  // namespace tandem::server
