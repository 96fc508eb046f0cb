// The engine's GPU start: device probe, memory plan, GPU expert worker and dense executor.
#include "engine/facade/gpu_plan.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "base/byte_text.h"
#include "engine/experts/moe_layer.h"
#include "engine/facade/gpu_held_sources.h"
#include "engine/facade/gpu_self_check.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/model/architecture.h"
#include "engine/placement/expert_sizes.h"
#include "engine/runtime/dense_device_plan.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/windowed_kv_cache.h"

namespace tandem::engine {
namespace {

// Positions per KV block: runtime::SchedulerOptions' default, which the engine keeps.
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

// Adds what the GPU dense executor would allocate (weights, KV mirror of `kv`, scratch for
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

size_t batch_tokens(const EngineOptions& options) {
  return static_cast<size_t>(std::max<int64_t>(1, options.limits.max_batch_tokens));
}

}  // namespace

Result<GpuProbe> probe_gpu(const EngineOptions& options) {
  GpuProbe probe;
  probe.device = options.gpu_device;
  probe.backend_built = gpu::backend_built();
  if (probe.backend_built) {
    const Result<std::vector<gpu::DeviceInfo>> devices = gpu::list_devices();
    if (!devices.ok()) {
      // The startup banner already warned; everything runs on the CPU.
      spdlog::debug("{}: {}", gpu::backend_name(), devices.status().message());
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
      const gpu::DeviceInfo& d = (*devices)[static_cast<size_t>(probe.device)];
      probe.label = "device " + std::to_string(probe.device) + " (" + d.name + ")";
      TANDEM_ASSIGN_OR_RETURN(const gpu::DeviceMemory memory, gpu::device_memory(probe.device));
      probe.free_bytes = memory.free_bytes;
      spdlog::info("GPU: {}: {} free of {}", probe.label, format_bytes(memory.free_bytes),
                   format_bytes(memory.total_bytes));
    }
  }
  if (options.dense_device == DenseDevice::kGpu && !probe.has_device()) {
    return failed_precondition_error(
        std::string("runtime.dense_device is gpu but ") +
        (probe.backend_built ? "no CUDA device is visible"
                             : "this tandemd was built without CUDA") +
        "; set runtime.dense_device: cpu (or auto) to run the dense parts on the CPU");
  }
  probe.dense_on_gpu = options.dense_device != DenseDevice::kCpu && probe.has_device();
  spdlog::info("dense parts and KV cache on the {}", probe.dense_on_gpu ? "GPU" : "CPU");
  return probe;
}

Result<GpuProbe> fit_probe_to_model(const EngineOptions& options,
                                    const model::Checkpoint& checkpoint, GpuProbe probe) {
  if (!probe.dense_on_gpu) return probe;
  if (!checkpoint.spec || !checkpoint.weights) {
    return failed_precondition_error("GPU plan: the checkpoint is not a runnable model");
  }
  const model::ModelSpec& spec = *checkpoint.spec;
  std::string why = runtime::dense_executor_unsupported(spec);
  if (why.empty()) {
    // The types of the matrices the executor would upload (the KV geometry does not matter).
    TANDEM_ASSIGN_OR_RETURN(
        const runtime::DenseDevicePlan plan,
        runtime::plan_dense_device(spec, *checkpoint.weights,
                                   {spec.n_layers, spec.kv_dim(), kKvBlockTokens, 1},
                                   batch_tokens(options), runtime::PrepareUse::kLayout));
    why = runtime::cuda_dense_unsupported_tensor(plan);
  }
  if (why.empty()) return probe;
  if (options.dense_device == DenseDevice::kGpu) {
    return failed_precondition_error("runtime.dense_device is gpu but " +
                                     std::string(model::architecture_name(spec.architecture)) +
                                     ": " + why + "; set runtime.dense_device: auto or cpu");
  }
  probe.dense_on_gpu = false;
  spdlog::info("dense parts and KV cache on the CPU after all: {}", why);
  return probe;
}

placement::GpuOffer gpu_offer(const EngineOptions& options, const GpuProbe& probe) {
  placement::GpuOffer offer;
  offer.device = probe.label.empty() ? "the GPU" : probe.label;
  offer.free_bytes = probe.free_bytes;
  offer.headroom = placement::default_gpu_headroom(probe.free_bytes);
  offer.budget = options.gpu_memory_budget;
  return offer;
}

Result<placement::GpuMemoryDemand> gpu_fixed_demand(const EngineOptions& options,
                                                    const model::Checkpoint& checkpoint,
                                                    const GpuProbe& probe, bool with_experts) {
  placement::GpuMemoryDemand demand;
  if (!checkpoint.spec || !checkpoint.weights) {
    return failed_precondition_error("GPU memory plan: the checkpoint is not a runnable model");
  }
  const model::ModelSpec& spec = *checkpoint.spec;
  const size_t tokens = batch_tokens(options);
  if (with_experts) {
    demand.expert_scratch = gpu::expert_scratch_bytes(spec.hidden_size, spec.expert_ffn_size,
                                                      tokens, spec.n_experts_used, spec.n_experts);
  }
  if (probe.dense_on_gpu) {
    // The scheduler's pool geometry for kv_cache_bytes (16-position blocks of the configured
    // element type; whole blocks of what the sliding-window rings leave; the full-attention layers
    // only, as the pool holds them), before the scheduler exists. The mirror holds those layers
    // for those blocks, and the windowed layers' rings beside it.
    runtime::KvLayerLayout layout = runtime::KvLayerLayout::of(spec);
    layout.type = options.kv_cache_type;
    runtime::KvGeometry kv;
    kv.n_layers = layout.n_full;
    kv.kv_dim = spec.kv_dim();
    kv.block_tokens = kKvBlockTokens;
    kv.type = options.kv_cache_type;
    kv.rings = runtime::device_window_rings(layout, options.limits, kKvBlockTokens);
    const uint64_t planes = spec.kv_value_dim() == 0 ? 1 : 2;  // MLA: the latent rows alone
    const uint64_t block_bytes =
        planes * kv.n_layers * kv.kv_dim * kernels::kv_type_bytes(kv.type) * kv.block_tokens;
    const auto rings = static_cast<uint64_t>(
        runtime::window_rings_budget_bytes(layout, kv.kv_dim, options.limits));
    const uint64_t pool_bytes = options.kv_cache_bytes > rings ? options.kv_cache_bytes - rings : 0;
    kv.n_blocks = block_bytes == 0 ? 0 : pool_bytes / block_bytes;
    TANDEM_RETURN_IF_ERROR(add_dense_demand(checkpoint, kv, tokens, demand));
  }
  return demand;
}

Result<GpuServing> attach_gpu(const EngineOptions& options, const model::Checkpoint& checkpoint,
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
  if (scheduler.running()) {
    return failed_precondition_error("the GPU must be attached before the scheduler starts");
  }
  const model::ModelSpec& spec = *checkpoint.spec;
  const size_t tokens = batch_tokens(options);
  TANDEM_ASSIGN_OR_RETURN(placement::ExpertSizes sizes, placement::expert_sizes(checkpoint));
  placement::GpuMemoryDemand demand;
  runtime::KvPool& pool = scheduler.kv_pool();
  // The windowed layers of a model with sliding windows in the executor's rings, one per running
  // sequence (the pool holds the full layers).
  const runtime::DeviceWindowRings rings = runtime::device_window_rings(
      scheduler.runner().kv_layout(), scheduler.limits(), pool.block_tokens());
  if (probe.dense_on_gpu) {
    TANDEM_RETURN_IF_ERROR(add_dense_demand(
        checkpoint,
        {pool.n_layers(), pool.kv_dim(), pool.block_tokens(), pool.n_blocks(), pool.type(), rings},
        tokens, demand));
  }
  demand.experts = placement::gpu_expert_bytes(map, sizes);
  demand.n_experts = n_gpu_experts;
  // The expert worker reserves scratch only for as many experts as one layer holds.
  if (n_gpu_experts > 0) {
    demand.expert_scratch =
        gpu::expert_scratch_bytes(spec.hidden_size, spec.expert_ffn_size, tokens,
                                  spec.n_experts_used, most_gpu_experts_in_a_layer(map));
  }
  TANDEM_RETURN_IF_ERROR(
      placement::check_gpu_memory(demand, gpu_offer(options, probe), map, sizes));
  spdlog::info("GPU plan on {}: {}", probe.label, placement::format_gpu_demand(demand));
  serving.planned = demand;

  runtime::ModelRunner& runner = scheduler.runner();
  // The probe on the CPU alone first: the reference of the self-check below. Both in the
  // scheduler's prefill chunks, which the window rings are sized for.
  const auto pass_tokens =
      static_cast<size_t>(std::max<int64_t>(scheduler.limits().prefill_chunk_tokens, 1));
  TANDEM_ASSIGN_OR_RETURN(const std::vector<float> cpu_probe,
                          run_probe(runner, nullptr, pass_tokens));
  if (n_gpu_experts > 0) {
    experts::ExpertMap experts_map =
        experts::ExpertMap::uniform(checkpoint.weights->layers.size(), spec.n_experts, 0);
    for (const auto& [layer, expert] : map.gpu_experts()) experts_map.set(layer, expert, 1);
    gpu::ExpertWorkerOptions worker_options;
    worker_options.device = probe.device;
    worker_options.worker = 1;
    worker_options.reserve_tokens = tokens;
    worker_options.k = spec.n_experts_used;
    TANDEM_ASSIGN_OR_RETURN(
        gpu::GpuExperts made,
        gpu::create_expert_worker(spec, *checkpoint.weights, experts_map, worker_options));
    serving.allocated.experts = made.weight_bytes;
    serving.allocated.n_experts = made.n_experts;
    serving.allocated.expert_scratch = made.device_bytes - made.weight_bytes;
    TANDEM_RETURN_IF_ERROR(runner.set_expert_workers({&runner.cpu_worker(), made.worker.get()},
                                                     std::move(experts_map)));
    serving.experts = std::move(made.worker);
  }
  if (probe.dense_on_gpu) {
    TANDEM_ASSIGN_OR_RETURN(
        gpu::GpuDense dense,
        gpu::create_dense_executor(
            spec, *checkpoint.weights, pool,
            {.device = probe.device, .max_batch_tokens = tokens, .window_rings = rings}));
    serving.allocated.dense = dense.bytes.dense_weights;
    serving.allocated.kv = dense.bytes.kv;
    serving.allocated.dense_scratch = dense.bytes.scratch;
    TANDEM_RETURN_IF_ERROR(runner.set_dense_executor(std::move(dense.executor)));
  }
  serving.device_label = probe.label;
  serving.dense_on_gpu = probe.dense_on_gpu;
  TANDEM_ASSIGN_OR_RETURN(const std::vector<float> gpu_probe,
                          run_probe(runner, probe.dense_on_gpu ? &pool : nullptr, pass_tokens));
  const std::string what = std::to_string(n_gpu_experts) + " experts" +
                           (probe.dense_on_gpu ? " and the dense parts" : "");
  TANDEM_RETURN_IF_ERROR(check_probe(cpu_probe, gpu_probe, what));
  spdlog::info("GPU self-check: {} probe logits within {:.2e} (relative L2) of the CPU's",
               gpu_probe.size(), relative_error(cpu_probe, gpu_probe));
  const std::vector<std::pair<uint32_t, uint32_t>> gpu_experts = map.gpu_experts();
  const uint64_t released =
      release_gpu_held_sources(*checkpoint.weights, gpu_experts, probe.dense_on_gpu);
  spdlog::info("GPU: the checkpoint pages of the {} of weights it holds leave host memory",
               format_bytes(released));
  spdlog::info("GPU allocated on {}: {}", probe.label,
               placement::format_gpu_demand(serving.allocated));
  return serving;
}

}  // namespace tandem::engine
