// Engine::create: checkpoint, device choice, placement, runner, scheduler, GPU, tokenizer.
#include "engine/facade/engine.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <utility>

#include <spdlog/spdlog.h>

#include "base/byte_text.h"
#include "engine/facade/tokenizer_directory.h"
#include "engine/model/architecture.h"
#include "engine/placement/placement_report.h"

namespace tandem::engine {
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
  spdlog::info("model: {} in all{}: experts {}, dense {}, embeddings {}", mib(sizes.total),
               checkpoint.files.size() > 1
                   ? " over " + std::to_string(checkpoint.files.size()) + " files"
                   : std::string(),
               mib(sizes.experts), mib(sizes.dense), mib(sizes.embeddings));
}

Status check_context_length(int configured, uint64_t model_context, const std::string& path) {
  if (configured <= 0 || model_context == 0) return Status();
  if (static_cast<uint64_t>(configured) <= model_context) return Status();
  return invalid_argument_error("model.context_length " + std::to_string(configured) +
                                " is larger than the " + std::to_string(model_context) +
                                " tokens of context that " + path +
                                " declares; set it to at most " + std::to_string(model_context) +
                                ", or 0 for the model's own");
}

// The GPU memory the budget policy may fill with experts.
Result<placement::GpuBudget> expert_budget(const EngineOptions& options,
                                           const model::Checkpoint& checkpoint,
                                           const GpuProbe& probe) {
  placement::GpuBudget budget;
  if (options.placement.policy != placement::PlacementPolicy::kBudget) return budget;
  if (probe.has_device()) {
    budget.usable = gpu_offer(options, probe).usable();
    TANDEM_ASSIGN_OR_RETURN(const placement::GpuMemoryDemand fixed,
                            gpu_fixed_demand(options, checkpoint, probe, true));
    budget.reserved = fixed.fixed();
  } else {
    // No device: the plan is only reported (GPU experts without a device are refused).
    budget.usable = options.gpu_memory_budget;
    budget.reserved = placement::gpu_reserved_bytes(checkpoint, options.kv_cache_bytes,
                                                    placement::kDefaultGpuScratchBytes);
  }
  return budget;
}

Status check_gpu_experts_have_device(const placement::StartupPlacement& planned,
                                     const GpuProbe& probe) {
  const uint64_t asked = planned.report.n_gpu_experts;
  if (asked == 0 || probe.n_devices > 0) return Status();
  return failed_precondition_error(
      "the placement puts " + std::to_string(asked) + " experts on the GPU but no CUDA device is " +
      (probe.backend_built ? "present" : "present (this tandemd was built without CUDA)") +
      "; to run every expert on the CPU use the frequency or uniform policy with "
      "placement.num_gpu_experts: 0");
}

// The tokens that end a sequence: the model's EOS, the tokenizer's, and generation_config.json's
// in the tokenizer directory; sorted, unique.
std::vector<int32_t> eos_token_ids(const model::ModelSpec& spec,
                                   const tokenizer::Tokenizer* tokenizer,
                                   const std::string& tokenizer_dir) {
  std::vector<int32_t> ids;
  if (spec.eos_token_id.has_value()) ids.push_back(static_cast<int32_t>(*spec.eos_token_id));
  if (tokenizer != nullptr && tokenizer->eos_id().has_value()) ids.push_back(*tokenizer->eos_id());
  if (!tokenizer_dir.empty()) {
    for (const int32_t id : generation_config_eos(tokenizer_dir)) {
      if (id < static_cast<int32_t>(spec.vocab_size)) ids.push_back(id);
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(EngineOptions options, EngineStage* failed_stage) {
  EngineStage unused = EngineStage::kDevices;
  EngineStage& stage = failed_stage != nullptr ? *failed_stage : unused;
  std::unique_ptr<Engine> engine(new Engine());

  stage = EngineStage::kCheckpoint;
  if (options.model_path.empty()) {
    return failed_precondition_error(
        "no model configured: set model.path (YAML), TANDEM_MODEL_PATH or --model.path");
  }
  stage = EngineStage::kDevices;
  TANDEM_ASSIGN_OR_RETURN(GpuProbe probe, probe_gpu(options));

  stage = EngineStage::kCheckpoint;
  TANDEM_ASSIGN_OR_RETURN(engine->checkpoint_, model::open_model(options.model_path));
  const model::Checkpoint& checkpoint = engine->checkpoint_;
  log_model(checkpoint);
  if (options.read_into_memory) {
    const auto started = std::chrono::steady_clock::now();
    TANDEM_RETURN_IF_ERROR(model::load_checkpoint_into_memory(checkpoint));
    spdlog::info(
        "model: read into memory in {:.1f} s (model.load_mode read): the files may "
        "change on disk without affecting this server",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  const model::ModelSpec& spec = *checkpoint.spec;
  TANDEM_RETURN_IF_ERROR(
      check_context_length(options.context_length, spec.context_length, checkpoint.path));
  TANDEM_ASSIGN_OR_RETURN(probe, fit_probe_to_model(options, checkpoint, probe));
  TANDEM_ASSIGN_OR_RETURN(const placement::GpuBudget budget,
                          expert_budget(options, checkpoint, probe));
  TANDEM_ASSIGN_OR_RETURN(engine->placement_,
                          placement::plan_startup_placement(options.placement, checkpoint, budget));
  std::istringstream table(placement::format_report_table(engine->placement_.report));
  for (std::string line; std::getline(table, line);) spdlog::info("{}", line);
  TANDEM_RETURN_IF_ERROR(check_gpu_experts_have_device(engine->placement_, probe));
  runtime::RoutingObserver* observer = nullptr;
  if (options.routing_observer) {
    TANDEM_ASSIGN_OR_RETURN(observer, options.routing_observer(checkpoint, engine->placement_));
  }

  stage = EngineStage::kEngine;
  if (options.load_tokenizer) {
    TANDEM_ASSIGN_OR_RETURN(engine->tokenizer_, load_model_tokenizer(options.model_path));
  }
  runtime::RunnerOptions runner_options;
  runner_options.threads = options.threads;
  runner_options.interleave_experts = options.repack_weights;
  runner_options.gpu_experts = engine->placement_.placement.map.gpu_experts();
  // The bytes each layer's expert copies came from, and those released before (dense copies,
  // tensors replaced at open), are freed as the layers are copied, not only once start-up is done:
  // read into memory, the model is then held about once during the copy, not twice. Nothing reads
  // them again (the self-check's probe computes the CPU's experts from their copies, the GPU's
  // from rows that are not released before their upload).
  uint64_t freed = 0;
  if (options.free_copied_sources) {
    runner_options.after_expert_layer = [&checkpoint, &freed] {
      freed += model::drop_released_copies(checkpoint);
    };
  }
  // With the dense parts on the GPU the CPU computes them only for the start-up self-check's
  // 8-token probe: interleaved copies (bit-identical to the rows) would be that many bytes of host
  // memory again for nothing (about 9 GB for DeepSeek-V3's Q4_K_M attention and shared experts).
  runner_options.interleave_dense = options.repack_weights && !probe.dense_on_gpu;
  runner_options.numa = options.numa;
  runner_options.kv_type = options.kv_cache_type;
  runner_options.context_length = static_cast<size_t>(std::max(0, options.context_length));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<runtime::ModelRunner> runner,
                          runtime::ModelRunner::create(spec, *checkpoint.weights, runner_options));
  const int64_t context = static_cast<int64_t>(runner->context_length());

  ModelFacts& facts = engine->facts_;
  if (engine->tokenizer_ != nullptr && options.export_tokenizer) {
    TANDEM_ASSIGN_OR_RETURN(facts.tokenizer_path,
                            tokenizer_directory(options, engine->tokenizer_export_));
  }
  runtime::SchedulerOptions scheduler_options;
  scheduler_options.limits = options.limits;
  scheduler_options.limits.context_length = context;
  scheduler_options.kv_budget_bytes = static_cast<int64_t>(options.kv_cache_bytes);
  scheduler_options.prefix_caching = options.prefix_caching;
  scheduler_options.queue_capacity = options.queue_capacity;
  scheduler_options.eos_token_ids =
      eos_token_ids(spec, engine->tokenizer_.get(), facts.tokenizer_path);
  scheduler_options.tokenizer = engine->tokenizer_.get();
  scheduler_options.routing_observer = observer;
  if (options.watch_files) {
    // After every forward pass: a model file truncated or rewritten under its mapping fails the
    // scheduler instead of serving garbage (read_into_memory leaves no file to watch).
    scheduler_options.weights_check = [&checkpoint] {
      return model::check_checkpoint_files(checkpoint);
    };
  }
  scheduler_options.after_step = std::move(options.after_step);
  facts.eos_token_ids = scheduler_options.eos_token_ids;
  Result<std::unique_ptr<runtime::Scheduler>> scheduler =
      runtime::Scheduler::create(std::move(runner), std::move(scheduler_options));
  if (!scheduler.ok()) {
    return Status(scheduler.status().code(),
                  "runtime / server limits: " + scheduler.status().message());
  }
  engine->scheduler_ = std::move(scheduler).value();
  TANDEM_ASSIGN_OR_RETURN(engine->gpu_, attach_gpu(options, checkpoint, engine->placement_, probe,
                                                   *engine->scheduler_));
  if (options.free_copied_sources) {
    // Start-up is done: nothing reads the bytes that were repacked or that the GPU holds again.
    freed += model::drop_released_copies(checkpoint);
    if (freed > 0 || options.read_into_memory) {
      spdlog::info(
          "model: {} of its copies in memory freed (read into memory or converted at open; "
          "repacked, or held by the GPU)",
          format_bytes(freed));
    }
  }

  facts.model_path = absolute_path(options.model_path);
  const model::ArchitectureTraits& traits = model::traits(spec.architecture);
  facts.model_type = std::string(traits.hf_model_type);
  facts.architectures = {std::string(traits.hf_class)};
  facts.context_length = context;
  facts.vocab_size = static_cast<int64_t>(spec.vocab_size);
  if (spec.bos_token_id.has_value()) facts.bos_token_id = static_cast<int32_t>(*spec.bos_token_id);
  if (engine->tokenizer_ != nullptr && engine->tokenizer_->pad_id().has_value()) {
    facts.pad_token_id = *engine->tokenizer_->pad_id();
  }
  return engine;
}

Engine::~Engine() {
  if (scheduler_ != nullptr && scheduler_->running()) scheduler_->stop(runtime::StopMode::kAbort);
  scheduler_.reset();  // before the offline allocator and the GPU objects it points into
  offline_allocator_.reset();
}

Result<std::unique_ptr<runtime::KvCache>> Engine::sequence_cache(size_t positions) {
  if (scheduler_->running() || scheduler_->steps() > 0) {
    return failed_precondition_error(
        "a cache for direct forward passes cannot share the KV pool of a scheduler that has run");
  }
  runtime::ModelRunner& runner = scheduler_->runner();
  if (runner.dense_executor() == nullptr) {
    return std::unique_ptr<runtime::KvCache>(runner.new_kv_cache(positions));
  }
  // The dense executor takes only caches of the scheduler's pool: the blocks come through an
  // allocator of its own, which is sound while the scheduler never admits anything.
  runtime::KvPool& pool = scheduler_->kv_pool();
  if (offline_allocator_ == nullptr) {
    TANDEM_ASSIGN_OR_RETURN(runtime::KvBlockAllocator allocator, runtime::make_allocator_for(pool));
    offline_allocator_ = std::make_unique<runtime::KvBlockAllocator>(std::move(allocator));
  }
  const size_t blocks = (positions + pool.block_tokens() - 1) / pool.block_tokens();
  if (static_cast<int64_t>(blocks) > offline_allocator_->free_blocks()) {
    return resource_exhausted_error(
        "a cache of " + std::to_string(positions) + " positions needs " + std::to_string(blocks) +
        " KV blocks; the pool has " + std::to_string(offline_allocator_->free_blocks()) + " free");
  }
  return std::unique_ptr<runtime::KvCache>(std::make_unique<runtime::PagedKvCache>(
      pool, *offline_allocator_, runtime::SeqId{++offline_sequences_}, positions));
}

}  // namespace tandem::engine
