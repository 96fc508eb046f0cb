// tandemd's GPU start: device probe, memory plan, CUDA expert worker and dense executor.
#include "server/gpu_startup.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "engine/base/byte_text.h"
#include "engine/experts/moe_layer.h"
#include "engine/placement/expert_sizes.h"
#include "server/gpu_self_check.h"

#if defined(TANDEM_WITH_CUDA)
#include "engine/experts/cuda_expert_worker.h"
#include "engine/runtime/cuda_dense_executor.h"
#include "kernels/cuda/device_info.h"
#endif

namespace tandem::server {
namespace {

#if defined(TANDEM_WITH_CUDA)
// Positions per KV block: runtime::SchedulerOptions' default, which start_engine keeps.
constexpr size_t kKvBlockTokens = 16;

// The largest number of (layer, expert) pairs the placement gives one MoE layer.
size_t most_gpu_experts_in_a_layer(const placement::DeviceMap& map) {
  size_t most = 0;
  for (size_t row = 0; row < map.layers().size(); ++row) {
    size_t n = 0;
    for (uint64_t e = 0; e < map.n_experts(); ++e) {
      n += map.at_row(row, e) == placement::Device::kGpu ? 1 : 0;
    }
    most = std::max(most, n);
  }
  return most;
}

// Adds what the CUDA dense executor would allocate (weights, KV mirror of `kv`, scratch for
// `tokens` tokens) to `demand`.
Status add_dense_demand(const model::Checkpoint& checkpoint, const runtime::KvGeometry& kv,
                        size_t tokens, placement::GpuMemoryDemand& demand) {
  TANDEM_ASSIGN_OR_RETURN(
      const runtime::CudaDenseBytes dense,
      runtime::estimate_cuda_dense_bytes(*checkpoint.spec, *checkpoint.weights, kv, tokens));
  demand.dense = dense.dense_weights;
  demand.kv = dense.kv;
  demand.dense_scratch = dense.scratch;
  return Status();
}
#endif

}  // namespace

Result<GpuProbe> probe_gpu(const config::Config& config) {
  GpuProbe probe;
  probe.device = config.runtime.cuda_device;
  const config::DenseDevice wanted = config.runtime.dense_device;
#if defined(TANDEM_WITH_CUDA)
  probe.cuda_built = true;
  const Result<std::vector<kernels::cuda::DeviceInfo>> devices = kernels::cuda::list_devices();
  if (!devices.ok()) {
    // The startup banner already warned; everything runs on the CPU.
    spdlog::debug("CUDA: {}", devices.status().message());
  } else {
    probe.n_devices = static_cast<int>(devices->size());
  }
  if (probe.n_devices > 0 && !probe.has_device()) {
    return invalid_argument_error("runtime.cuda_device " + std::to_string(probe.device) +
                                  " does not exist: " + std::to_string(probe.n_devices) +
                                  " CUDA device(s) are visible (ordinals 0.." +
                                  std::to_string(probe.n_devices - 1) + ")");
  }
  if (probe.has_device()) {
    const kernels::cuda::DeviceInfo& d = (*devices)[static_cast<size_t>(probe.device)];
    probe.label = "device " + std::to_string(probe.device) + " (" + d.name + ")";
    TANDEM_ASSIGN_OR_RETURN(kernels::cuda::DeviceMemory memory,
                            kernels::cuda::device_memory(probe.device));
    probe.free_bytes = memory.free_bytes;
    spdlog::info("GPU: {}: {} free of {}", probe.label, format_bytes(memory.free_bytes),
                 format_bytes(memory.total_bytes));
  }
#endif
  if (wanted == config::DenseDevice::kGpu && !probe.has_device()) {
    return failed_precondition_error(
        std::string("runtime.dense_device is gpu but ") +
        (probe.cuda_built ? "no CUDA device is visible" : "this tandemd was built without CUDA") +
        "; set runtime.dense_device: cpu (or auto) to run the dense parts on the CPU");
  }
  probe.dense_on_gpu = wanted != config::DenseDevice::kCpu && probe.has_device();
  spdlog::info("dense parts and KV cache on the {}", probe.dense_on_gpu ? "GPU" : "CPU");
  return probe;
}

placement::GpuOffer gpu_offer(const config::Config& config, const GpuProbe& probe) {
  placement::GpuOffer offer;
  offer.device = probe.label.empty() ? "the GPU" : probe.label;
  offer.free_bytes = probe.free_bytes;
  offer.headroom = placement::default_gpu_headroom(probe.free_bytes);
  offer.budget = config.placement.gpu_memory_budget;
  return offer;
}

Result<placement::GpuMemoryDemand> gpu_fixed_demand(const config::Config& config,
                                                    const model::Checkpoint& checkpoint,
                                                    const GpuProbe& probe, bool with_experts) {
  placement::GpuMemoryDemand demand;
  if (!checkpoint.spec || !checkpoint.weights) {
    return failed_precondition_error("GPU memory plan: the checkpoint is not a runnable model");
  }
#if defined(TANDEM_WITH_CUDA)
  const model::ModelSpec& spec = *checkpoint.spec;
  const size_t tokens = static_cast<size_t>(config.runtime.max_batch_tokens);
  if (with_experts) {
    demand.expert_scratch = experts::CudaExpertWorker::scratch_bytes(
        spec.hidden_size, spec.expert_ffn_size, tokens, spec.n_experts_used, spec.n_experts);
  }
  if (probe.dense_on_gpu) {
    // The scheduler's pool geometry for runtime.kv_cache_bytes (16-position blocks; whole blocks
    // of the budget), before the scheduler exists.
    runtime::KvGeometry kv;
    kv.n_layers = spec.n_layers;
    kv.kv_dim = spec.kv_dim();
    kv.block_tokens = kKvBlockTokens;
    const uint64_t block_bytes =
        uint64_t{2} * kv.n_layers * kv.kv_dim * sizeof(float) * kv.block_tokens;
    kv.n_blocks = block_bytes == 0 ? 0 : config.runtime.kv_cache_bytes / block_bytes;
    TANDEM_RETURN_IF_ERROR(add_dense_demand(checkpoint, kv, tokens, demand));
  }
#else
  (void)config;
  (void)probe;
  (void)with_experts;
#endif
  return demand;
}

Result<GpuServing> attach_gpu(const config::Config& config, const model::Checkpoint& checkpoint,
                              const placement::StartupPlacement& planned, const GpuProbe& probe,
                              runtime::Scheduler& scheduler) {
  GpuServing serving;
  const placement::DeviceMap& map = planned.placement.map;
  const uint64_t n_gpu_experts = map.n_gpu();
  if (n_gpu_experts == 0 && !probe.dense_on_gpu) return serving;
  if (!probe.has_device()) {
    return failed_precondition_error(
        "the placement puts " + std::to_string(n_gpu_experts) +
        " experts on the GPU but no CUDA device is present; set placement.num_gpu_experts: 0");
  }
#if defined(TANDEM_WITH_CUDA)
  const model::ModelSpec& spec = *checkpoint.spec;
  TANDEM_ASSIGN_OR_RETURN(placement::ExpertSizes sizes, placement::expert_sizes(checkpoint));
  placement::GpuMemoryDemand demand;
  if (probe.dense_on_gpu) {
    const runtime::KvPool& pool = scheduler.kv_pool();
    TANDEM_RETURN_IF_ERROR(add_dense_demand(
        checkpoint, {pool.n_layers(), pool.kv_dim(), pool.block_tokens(), pool.n_blocks()},
        static_cast<size_t>(config.runtime.max_batch_tokens), demand));
  }
  demand.experts = placement::gpu_expert_bytes(map, sizes);
  demand.n_experts = n_gpu_experts;
  // The expert worker reserves scratch only for as many experts as one layer holds.
  if (n_gpu_experts > 0) {
    demand.expert_scratch = experts::CudaExpertWorker::scratch_bytes(
        spec.hidden_size, spec.expert_ffn_size,
        static_cast<size_t>(config.runtime.max_batch_tokens), spec.n_experts_used,
        most_gpu_experts_in_a_layer(map));
  }
  TANDEM_RETURN_IF_ERROR(placement::check_gpu_memory(demand, gpu_offer(config, probe), map, sizes));
  spdlog::info("GPU plan on {}: {}", probe.label, placement::format_gpu_demand(demand));

  runtime::ModelRunner& runner = scheduler.runner();
  // The probe on the CPU alone first: the reference of the self-check below.
  TANDEM_ASSIGN_OR_RETURN(const std::vector<float> cpu_probe, run_probe(runner, nullptr));
  if (n_gpu_experts > 0) {
    experts::ExpertMap experts_map =
        experts::ExpertMap::uniform(checkpoint.weights->layers.size(), spec.n_experts, 0);
    for (const auto& [layer, expert] : map.gpu_experts()) experts_map.set(layer, expert, 1);
    experts::CudaExpertWorker::Options options;
    options.device = probe.device;
    options.worker = 1;
    options.reserve_tokens = static_cast<size_t>(config.runtime.max_batch_tokens);
    options.k = spec.n_experts_used;
    TANDEM_ASSIGN_OR_RETURN(
        std::unique_ptr<experts::CudaExpertWorker> worker,
        experts::CudaExpertWorker::create(spec, *checkpoint.weights, experts_map, options));
    serving.allocated.experts = worker->weight_bytes();
    serving.allocated.n_experts = worker->n_experts_held();
    serving.allocated.expert_scratch = worker->device_bytes() - worker->weight_bytes();
    TANDEM_RETURN_IF_ERROR(
        runner.set_expert_workers({&runner.cpu_worker(), worker.get()}, std::move(experts_map)));
    serving.experts = std::move(worker);
  }
  if (probe.dense_on_gpu) {
    runtime::CudaDenseOptions options;
    options.device = probe.device;
    options.max_batch_tokens = static_cast<size_t>(config.runtime.max_batch_tokens);
    TANDEM_ASSIGN_OR_RETURN(runtime::CudaDenseInfo dense,
                            runtime::enable_cuda_dense(scheduler, options));
    serving.allocated.dense = dense.bytes.dense_weights;
    serving.allocated.kv = dense.bytes.kv;
    serving.allocated.dense_scratch = dense.bytes.scratch;
  }
  serving.device_label = probe.label;
  serving.dense_on_gpu = probe.dense_on_gpu;
  TANDEM_ASSIGN_OR_RETURN(const std::vector<float> gpu_probe,
                          run_probe(runner, probe.dense_on_gpu ? &scheduler.kv_pool() : nullptr));
  const std::string what = std::to_string(n_gpu_experts) + " experts" +
                           (probe.dense_on_gpu ? " and the dense parts" : "");
  TANDEM_RETURN_IF_ERROR(check_probe(cpu_probe, gpu_probe, what));
  spdlog::info("GPU self-check: {} probe logits within {:.2e} (relative L2) of the CPU's",
               gpu_probe.size(), relative_error(cpu_probe, gpu_probe));
  spdlog::info("GPU allocated on {}: {}", probe.label,
               placement::format_gpu_demand(serving.allocated));
  return serving;
#else
  (void)config;
  (void)checkpoint;
  (void)scheduler;
  return failed_precondition_error("this tandemd was built without CUDA");
#endif
}

}  // namespace tandem::server
