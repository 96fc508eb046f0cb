// Config -> EngineOptions, model.format, GetModelInfo's facts.
#include "server/engine_config.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "engine/model/gguf_split.h"
#include "server/exit_codes.h"

namespace tandem::server {
namespace {

namespace fs = std::filesystem;

engine::DenseDevice dense_device(config::DenseDevice d) {
  switch (d) {
    case config::DenseDevice::kCpu:
      return engine::DenseDevice::kCpu;
    case config::DenseDevice::kGpu:
      return engine::DenseDevice::kGpu;
    case config::DenseDevice::kAuto:
      break;
  }
  return engine::DenseDevice::kAuto;
}

bool is_directory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

}  // namespace

engine::EngineOptions engine_options(const config::Config& config) {
  engine::EngineOptions o;
  o.model_path = config.model.path;
  o.read_into_memory = config.model.load_mode == config::LoadMode::kRead;
  o.context_length = config.model.context_length;
  o.placement.policy = config.placement.policy;
  o.placement.num_gpu_experts = config.placement.num_gpu_experts;
  o.placement.stats_path = config.placement.stats_path;
  o.gpu_memory_budget = config.placement.gpu_memory_budget;
  o.dense_device = dense_device(config.runtime.dense_device);
  o.gpu_device = config.runtime.cuda_device;
  o.threads = config.runtime.threads;
  o.repack_weights = config.runtime.repack_weights;
  o.numa = config.runtime.numa;
  o.kv_cache_type = config.runtime.kv_cache_type;
  o.limits.max_batch_tokens = config.runtime.max_batch_tokens;
  o.limits.prefill_chunk_tokens = config.runtime.prefill_chunk_tokens;
  o.limits.max_running = config.server.max_running_requests;
  o.kv_cache_bytes = config.runtime.kv_cache_bytes;
  o.prefix_caching = config.runtime.prefix_caching;
  // The engine's queue bounds the requests in flight (running and waiting); the configuration
  // counts the waiting ones beyond a full batch (server.max_queued_requests).
  o.queue_capacity = static_cast<size_t>(config.server.max_queued_requests) +
                     static_cast<size_t>(config.server.max_running_requests);
  o.tokenizer_dir = config.model.tokenizer_dir;
  const char* tmp = std::getenv("TMPDIR");
  o.tokenizer_export_parent = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  return o;
}

Status check_model_format(config::ModelFormat configured, const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(model::CheckpointFormat detected, model::detect_checkpoint_format(path));
  if (configured == config::ModelFormat::kAuto) return Status();
  const model::CheckpointFormat wanted = configured == config::ModelFormat::kGguf
                                             ? model::CheckpointFormat::kGguf
                                             : model::CheckpointFormat::kSafetensors;
  if (wanted == detected) return Status();
  return invalid_argument_error(
      "model.format is " + std::string(model::checkpoint_format_name(wanted)) + " but " + path +
      " is " +
      (detected == model::CheckpointFormat::kGguf
           ? std::string("a GGUF file (it starts with the GGUF magic)")
           : std::string("not a GGUF file (no GGUF magic; a directory or safetensors file)")) +
      "; set model.format to auto or " + std::string(model::checkpoint_format_name(detected)));
}

ServedModelInfo served_model_info(const config::Config& config, const engine::Engine& engine) {
  const engine::ModelFacts& facts = engine.facts();
  ServedModelInfo info;
  info.model_path = facts.model_path;
  if (!config.model.served_name.empty()) {
    info.served_model_name = config.model.served_name;
  } else {
    fs::path p = fs::path(config.model.path).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
    // A split GGUF is named without its shard ending (DeepSeek-V3-Q4_K_M-00001-of-00009.gguf
    // serves as DeepSeek-V3-Q4_K_M).
    info.served_model_name = is_directory(config.model.path)
                                 ? p.filename().string()
                                 : model::strip_gguf_shard_suffix(p.stem().string());
  }
  info.tokenizer_path = facts.tokenizer_path;
  info.model_type = facts.model_type;
  info.architectures = facts.architectures;
  info.context_length = facts.context_length;
  info.vocab_size = facts.vocab_size;
  info.eos_token_ids = facts.eos_token_ids;
  info.bos_token_id = facts.bos_token_id;
  info.pad_token_id = facts.pad_token_id;
  return info;
}

int engine_exit_code(const Status& status, engine::EngineStage stage) {
  switch (stage) {
    case engine::EngineStage::kDevices:
      return kExitFailure;
    case engine::EngineStage::kCheckpoint:
      return startup_exit_code(status, StartupStage::kCheckpoint);
    case engine::EngineStage::kEngine:
      break;
  }
  return startup_exit_code(status, StartupStage::kEngine);
}

}  // namespace tandem::server
