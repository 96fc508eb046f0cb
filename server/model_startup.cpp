// tandemd's model start: checkpoint + placement, with their startup log lines.
#include "server/model_startup.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <sstream>
#include <string>

#include "engine/model/architecture.h"
#include "engine/runtime/dense_executor.h"
#if defined(TANDEM_WITH_CUDA)
#include "kernels/cuda/device_info.h"
#endif

namespace tandem::server {

namespace {

std::string mib(uint64_t bytes) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
  return out.str();
}

void log_model(const model::Checkpoint& checkpoint) {
  const model::ModelSpec& spec = *checkpoint.spec;
  const model::CheckpointSizes sizes = model::checkpoint_sizes(checkpoint);
  spdlog::info("model: {} ({}), {} layers, {} experts top-{}, hidden {}, vocab {}, context {}",
               checkpoint.path, model::architecture_name(spec.architecture), spec.n_layers,
               spec.n_experts, spec.n_experts_used, spec.hidden_size, spec.vocab_size,
               spec.context_length);
  spdlog::info("model: {} in all: experts {}, dense {}, embeddings {}", mib(sizes.total),
               mib(sizes.experts), mib(sizes.dense), mib(sizes.embeddings));
}

}  // namespace

Result<StartedModel> start_model(const config::Config& config, const GpuProbe& probe) {
  if (config.model.path.empty()) {
    return failed_precondition_error(
        "no model configured: set model.path (YAML), TANDEM_MODEL_PATH or --model.path");
  }
  TANDEM_RETURN_IF_ERROR(check_model_format(config.model.format, config.model.path));
  TANDEM_ASSIGN_OR_RETURN(model::Checkpoint checkpoint, model::open_model(config.model.path));
  log_model(checkpoint);
  if (config.model.load_mode == config::LoadMode::kRead) {
    const auto started = std::chrono::steady_clock::now();
    TANDEM_RETURN_IF_ERROR(model::load_checkpoint_into_memory(checkpoint));
    spdlog::info(
        "model: read into memory in {:.1f} s (model.load_mode read): the files may "
        "change on disk without affecting this server",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  TANDEM_RETURN_IF_ERROR(check_context_length(config.model.context_length,
                                              checkpoint.spec->context_length, checkpoint.path));
  GpuProbe gpu = probe;
  if (const std::string why = runtime::dense_executor_unsupported(*checkpoint.spec);
      gpu.dense_on_gpu && !why.empty()) {
    if (config.runtime.dense_device == config::DenseDevice::kGpu) {
      return failed_precondition_error(
          "runtime.dense_device is gpu but " +
          std::string(model::architecture_name(checkpoint.spec->architecture)) + ": " + why +
          "; set runtime.dense_device: auto or cpu");
    }
    gpu.dense_on_gpu = false;
    spdlog::info("dense parts and KV cache on the CPU after all: {}", why);
  }
  placement::GpuBudget budget;
  if (config.placement.policy == config::PlacementPolicy::kBudget) {
    if (gpu.has_device()) {
      budget.usable = gpu_offer(config, gpu).usable();
      TANDEM_ASSIGN_OR_RETURN(placement::GpuMemoryDemand fixed,
                              gpu_fixed_demand(config, checkpoint, gpu, true));
      budget.reserved = fixed.fixed();
    } else {
      // No device: the plan is only reported (tandemd refuses GPU experts without a device).
      budget.usable = config.placement.gpu_memory_budget;
      budget.reserved = placement::gpu_reserved_bytes(checkpoint, config.runtime.kv_cache_bytes,
                                                      placement::kDefaultGpuScratchBytes);
    }
  }
  TANDEM_ASSIGN_OR_RETURN(placement::StartupPlacement planned,
                          placement::plan_startup_placement(config.placement, checkpoint, budget));
  std::istringstream table(placement::format_report_table(planned.report));
  for (std::string line; std::getline(table, line);) spdlog::info("{}", line);
  return StartedModel{std::move(checkpoint), std::move(planned), std::move(gpu)};
}

Status check_context_length(int configured, uint64_t model_context, const std::string& model_path) {
  if (configured <= 0 || model_context == 0) return Status();
  if (static_cast<uint64_t>(configured) <= model_context) return Status();
  return invalid_argument_error("model.context_length " + std::to_string(configured) +
                                " is larger than the " + std::to_string(model_context) +
                                " tokens of context that " + model_path +
                                " declares; set it to at most " + std::to_string(model_context) +
                                ", or 0 for the model's own");
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

int visible_cuda_devices() {
#if defined(TANDEM_WITH_CUDA)
  auto devices = kernels::cuda::list_devices();
  if (!devices.ok()) {
    spdlog::warn("CUDA: {}", devices.status().message());
    return 0;
  }
  return static_cast<int>(devices->size());
#else
  return 0;
#endif
}

Status check_gpu_experts_have_device(const placement::StartupPlacement& planned, int cuda_devices) {
  const uint64_t asked = planned.report.n_gpu_experts;
  if (asked == 0 || cuda_devices > 0) return Status();
  return failed_precondition_error(
      "the placement puts " + std::to_string(asked) + " experts on the GPU but no CUDA device is " +
#if defined(TANDEM_WITH_CUDA)
      "present"
#else
      "present (this tandemd was built without CUDA)"
#endif
      "; to run every expert on the CPU use the frequency or uniform policy with "
      "placement.num_gpu_experts: 0");
}

}  // namespace tandem::server
