// The model half of tandemd's start: open the configured checkpoint and plan the expert
// placement once, before anything is served.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"
#include "engine/base/result.h"
#include "engine/model/checkpoint.h"
#include "engine/placement/placement_startup.h"
#include "server/gpu_startup.h"

namespace tandem::server {

struct StartedModel {
  model::Checkpoint checkpoint;
  placement::StartupPlacement placement;
  // The probe as this model uses it: dense_on_gpu cleared when the model's dense parts cannot run
  // on the GPU (runtime::dense_executor_unsupported) and runtime.dense_device is auto.
  GpuProbe gpu;
};

// Opens config.model.path (a runnable model is required), checks model.context_length against
// the model (check_context_length) and plans the placement from config.placement; policy budget
// fills the GPU memory `gpu` offers (gpu_offer) after what it must hold anyway (gpu_fixed_demand),
// or placement.gpu_memory_budget without a device. Errors name the path: FAILED_PRECONDITION when
// no model is configured or runtime.dense_device is gpu for a model whose dense parts cannot run
// there, the checkpoint reader's or the planner's error otherwise. Logs the model
// summary and the placement table (spdlog). Blocking I/O; call from main before any serving thread
// starts.
Result<StartedModel> start_model(const config::Config& config, const GpuProbe& probe = {});

// model.context_length against the context the model declares: OK for 0 (the model's own) or a
// value up to `model_context`, and for any value when the model declares none (0); otherwise
// INVALID_ARGUMENT naming the key, both numbers and `model_path`. Pure.
Status check_context_length(int configured, uint64_t model_context, const std::string& model_path);

// model.format against what `path` is (detect_checkpoint_format: GGUF magic, or a directory /
// safetensors file): OK for auto or a match; INVALID_ARGUMENT naming the key, the configured and
// the detected format and the path otherwise; the detector's error for a missing path.
// Blocking I/O (reads 4 bytes).
Status check_model_format(config::ModelFormat configured, const std::string& path);

// The CUDA devices this process can use: 0 in a build without CUDA, without a driver or without
// a device. Any thread.
int visible_cuda_devices();

// Startup rule for GPU experts: FAILED_PRECONDITION when the placement puts experts on the GPU
// (report.n_gpu_experts > 0) but cuda_devices is 0, naming how many GPU experts were asked and
// that no CUDA device is present (tandemd does not silently fall back to all-CPU). OK otherwise.
// Pure; tandemd calls it with visible_cuda_devices() after start_model.
Status check_gpu_experts_have_device(const placement::StartupPlacement& planned, int cuda_devices);

}  // namespace tandem::server
