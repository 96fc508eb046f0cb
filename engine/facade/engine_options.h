// EngineOptions: everything Engine::create needs, as plain values. tandemd and the CLI convert
// their configuration and flags to it; the engine reads no configuration, file names or
// environment of its own beyond what is here. Error messages name tandemd's configuration keys
// (model.context_length, runtime.dense_device, ...), the spelling every user of the engine sees.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "base/result.h"
#include "engine/model/checkpoint.h"
#include "engine/placement/placement_startup.h"
#include "engine/runtime/routing_observer.h"
#include "engine/runtime/scheduler_types.h"
#include "kernels/cpu/kv_type.h"

namespace tandem::engine {

// Where the dense parts of the forward pass (attention, norms, routers, shared experts, the lm
// head) and the KV cache run.
enum class DenseDevice {
  kAuto,  // on the GPU when the build has a GPU backend, the device exists and the GPU code runs
          // the model's dense parts; else on the CPU
  kCpu,
  kGpu,  // on the GPU, or refuse to start
};

// Where Engine::create failed: the devices (listing them, the device choice), the model's inputs
// (files, statistics, settings against the model), or building what runs it (tokenizer, runner,
// KV cache, scheduler, GPU copies).
enum class EngineStage { kDevices, kCheckpoint, kEngine };

struct EngineOptions {
  // The checkpoint: a GGUF file or a Hugging Face directory.
  std::string model_path;
  // Copy every file into the process's own memory after opening (the files may then change on
  // disk); false: serve from the mapping.
  bool read_into_memory = false;
  // Once start-up is done, free the bytes of the weights it repacked (or the GPU holds) where they
  // are the process's own (read into memory, or converted at open: model::drop_released_copies);
  // a later read of them would fault. false keeps them, for a caller that builds another expert
  // worker from the checkpoint afterwards (tandem bench --split-cpu-experts).
  bool free_copied_sources = true;
  // Tokens of context per sequence: 0 = the model's own; above the model's is INVALID_ARGUMENT.
  int context_length = 0;

  // Expert placement.
  placement::StartupPlacementOptions placement;
  // GPU bytes the engine may use in all (experts, dense parts, KV, scratch); 0 = the device's
  // free memory less headroom. Without a device, the budget policy's plan is only reported.
  uint64_t gpu_memory_budget = 0;

  DenseDevice dense_device = DenseDevice::kAuto;
  int gpu_device = 0;  // the GPU device ordinal

  // Forward threads (0 = one per online core).
  int threads = 0;
  // The CPU runner's interleaved copies of the expert and dense matrices whose kernels prefer
  // them (runtime::RunnerOptions::interleave_experts / interleave_dense; the dense ones only when
  // the dense parts run on the CPU).
  bool repack_weights = true;
  // Pin the CPU threads and interleave the expert copies over the NUMA nodes where there are
  // several (runtime::RunnerOptions::numa).
  bool numa = true;
  // Scheduler limits; limits.context_length is set from the model and context_length above.
  runtime::SchedulerLimits limits;
  uint64_t kv_cache_bytes = uint64_t{1} << 30;
  // The element type of the CPU KV cache (runtime::RunnerOptions::kv_type).
  kernels::KvType kv_cache_type = kernels::kDefaultKvCacheType;
  bool prefix_caching = true;
  // Requests in flight (running and waiting) the scheduler accepts.
  size_t queue_capacity = 256 + 64;

  // Load the model's tokenizer (text in the scheduler: detokenized events, stop strings); an
  // unreadable one is then an error. false: none (callers that tokenize themselves).
  bool load_tokenizer = true;
  // The tokenizer directory reported for the gateway (tokenizer.json and its configuration):
  // export_tokenizer false (or no tokenizer): none. Otherwise tokenizer_dir holding a
  // tokenizer.json is used as it is; a Hugging Face checkpoint directory is its own (tokenizer_dir
  // must then be empty); a GGUF file's tokenizer is exported into tokenizer_dir, or without one
  // into a new private directory under tokenizer_export_parent that the engine removes when it is
  // destroyed.
  bool export_tokenizer = true;
  std::string tokenizer_dir;
  std::string tokenizer_export_parent = "/tmp";

  // Called once, after the placement is planned and before the runner is built: the routing
  // observer that sees every forward pass (null: none). It is owned by the caller and must
  // outlive the engine. An error stops create() (stage kCheckpoint).
  std::function<Result<runtime::RoutingObserver*>(const model::Checkpoint&,
                                                  const placement::StartupPlacement&)>
      routing_observer;

  // Check the model files after every forward pass and fail the scheduler when they changed
  // under the mapping (model::check_checkpoint_files); off for benchmarks.
  bool watch_files = true;

  // Benchmark and test seam: runtime::SchedulerOptions::after_step (called on the scheduler
  // thread after every forward pass). Empty: nothing.
  std::function<void(int64_t)> after_step;
};

}  // namespace tandem::engine
