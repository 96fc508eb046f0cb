// Config: the typed configuration of tandemd, one struct per section, every field with its default.
//
// The defaults written here are the only place a default is declared: the field table
// (config/config_fields.h) reads them from a default-constructed Config for --print-config, the
// reference and the docs. A Config is a plain value: built once by load_config()
// (config/config_loader.h) on the main thread, then passed by const reference to the engine and
// server, which never read files or the environment themselves.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "engine/placement/placement_policy.h"
#include "kernels/cpu/kv_type.h"

namespace tandem::config {

// model.format: how to read the checkpoint at model.path.
enum class ModelFormat { kAuto, kGguf, kSafetensors };

// model.load_mode: how the weights are held: mapped from the file (shared with the page cache,
// started at once, but only as stable as the file) or read into the process's own memory.
enum class LoadMode { kMmap, kRead };

// placement.policy: how experts are chosen for the GPU; the planner's own enum.
using placement::PlacementPolicy;

// runtime.dense_device: where the dense parts of the forward pass (attention, norms, routers,
// shared experts, lm head) and the KV cache live.
enum class DenseDevice { kAuto, kCpu, kGpu };

// runtime.cpu_kernels: the CPU matmul kernel variant (kernels/cpu/matmul_dispatch.h).
enum class CpuKernels { kAuto, kScalar, kAvx2, kAvx512, kAmx };

// logging.level, in increasing severity; the names are spdlog's.
enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kCritical, kOff };

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 50051;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  std::vector<std::string> api_keys;
  std::vector<std::string> trusted_peers;  // CIDR networks whose calls need no API key
  int max_queued_requests = 256;
  int max_running_requests = 64;
  int shutdown_grace_seconds = 30;
};

struct MetricsConfig {
  std::string host = "127.0.0.1";
  int port = 9090;  // 0 = no metrics listener.
};

struct ModelConfig {
  std::string path;
  std::string served_name;    // "" = derived from path.
  std::string tokenizer_dir;  // "" = model dir (HF) or exported beside the GGUF file.
  ModelFormat format = ModelFormat::kAuto;
  LoadMode load_mode = LoadMode::kMmap;
  int context_length = 0;  // 0 = what the model declares.
};

struct PlacementConfig {
  PlacementPolicy policy = PlacementPolicy::kFrequency;
  int num_gpu_experts = 0;
  uint64_t gpu_memory_budget = 0;  // Bytes.
  std::string stats_path;
  std::string stats_output_path;
};

struct RuntimeConfig {
  int threads = 0;  // 0 = one per online core.
  int max_batch_tokens = 2048;
  uint64_t kv_cache_bytes = uint64_t{1} << 30;
  int prefill_chunk_tokens = 512;
  bool prefix_caching = true;
  DenseDevice dense_device = DenseDevice::kAuto;
  int cuda_device = 0;  // CUDA device ordinal (after CUDA_VISIBLE_DEVICES).
  CpuKernels cpu_kernels = CpuKernels::kAuto;
  bool repack_weights = true;
  bool numa = true;
  kernels::KvType kv_cache_type = kernels::kDefaultKvCacheType;
};

struct LoggingConfig {
  LogLevel level = LogLevel::kInfo;
  LogFormat format = LogFormat::kText;
};

struct Config {
  ServerConfig server;
  MetricsConfig metrics;
  ModelConfig model;
  PlacementConfig placement;
  RuntimeConfig runtime;
  LoggingConfig logging;
};

// The spellings of each enum, indexed by the enum's value. Configuration files, environment
// variables and flags use exactly these (lower case).
std::span<const std::string_view> enum_names(ModelFormat);
std::span<const std::string_view> enum_names(PlacementPolicy);
std::span<const std::string_view> enum_names(LogLevel);
std::span<const std::string_view> enum_names(LogFormat);
std::span<const std::string_view> enum_names(DenseDevice);
std::span<const std::string_view> enum_names(LoadMode);
std::span<const std::string_view> enum_names(CpuKernels);
std::span<const std::string_view> enum_names(kernels::KvType);

// The spelling of one value ("gguf", "budget", "info", "json").
template <typename E>
std::string_view enum_name(E value) {
  return enum_names(value)[static_cast<size_t>(value)];
}

}  // namespace tandem::config
