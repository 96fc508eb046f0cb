// The spellings of the configuration enums.
#include "config/config.h"

namespace tandem::config {

namespace {
constexpr std::string_view kModelFormatNames[] = {"auto", "gguf", "safetensors"};
constexpr std::string_view kLogLevelNames[] = {"trace", "debug",    "info", "warn",
                                               "error", "critical", "off"};
constexpr std::string_view kLogFormatNames[] = {"text", "json"};
constexpr std::string_view kDenseDeviceNames[] = {"auto", "cpu", "gpu"};
constexpr std::string_view kLoadModeNames[] = {"mmap", "read"};
constexpr std::string_view kCpuKernelsNames[] = {"auto", "scalar", "avx2", "avx512", "amx"};
}  // namespace

std::span<const std::string_view> enum_names(ModelFormat) {
  return kModelFormatNames;
}
std::span<const std::string_view> enum_names(PlacementPolicy) {
  return placement::placement_policy_names();
}
std::span<const std::string_view> enum_names(LogLevel) {
  return kLogLevelNames;
}
std::span<const std::string_view> enum_names(LogFormat) {
  return kLogFormatNames;
}

std::span<const std::string_view> enum_names(DenseDevice) {
  return kDenseDeviceNames;
}

std::span<const std::string_view> enum_names(LoadMode) {
  return kLoadModeNames;
}

std::span<const std::string_view> enum_names(CpuKernels) {
  return kCpuKernelsNames;
}

std::span<const std::string_view> enum_names(kernels::KvType) {
  return kernels::kv_type_names();
}

}  // namespace tandem::config
