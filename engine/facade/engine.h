// Engine: the one façade that builds and serves a model. create() opens the checkpoint, decides
// where the dense parts run, plans the expert placement, builds the runner, the CPU and GPU
// expert workers and the dense executor, runs the GPU self-check and creates the scheduler;
// tandemd and the CLI only convert their configuration to EngineOptions and talk to this.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/file_replace.h"
#include "base/result.h"
#include "engine/facade/engine_options.h"
#include "engine/facade/gpu_plan.h"
#include "engine/model/checkpoint.h"
#include "engine/placement/placement_startup.h"
#include "engine/runtime/kv_block_allocator.h"
#include "engine/runtime/kv_cache.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/paged_kv_cache.h"
#include "engine/runtime/scheduler.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::engine {

// What the engine knows of the model it serves (GetModelInfo's facts). A plain value.
struct ModelFacts {
  std::string model_path;                  // absolute
  std::string tokenizer_path;              // a directory the gateway can read; "" = none
  std::string model_type;                  // e.g. "qwen3_moe"
  std::vector<std::string> architectures;  // e.g. "Qwen3MoeForCausalLM"
  int64_t context_length = 0;
  int64_t vocab_size = 0;
  std::vector<int32_t> eos_token_ids;  // sorted, unique: what ends a sequence
  int32_t bos_token_id = -1;           // -1: none
  int32_t pad_token_id = -1;           // -1: none
};

// Owns the checkpoint, the placement, the GPU objects, the tokenizer and the scheduler (in that
// order of construction; destroyed the other way). Created and destroyed on one thread (main);
// the serving calls may come from any thread, as the scheduler's (scheduler.h).
class Engine {
 public:
  // Builds everything; the scheduler is created, not started. Errors name the setting or the
  // file at fault (see EngineOptions); `failed_stage` (may be null) is set to where it failed.
  // Logs the model summary, the device choice, the placement table and the GPU plan (spdlog).
  // Blocking I/O; main thread.
  static Result<std::unique_ptr<Engine>> create(EngineOptions options,
                                                EngineStage* failed_stage = nullptr);
  ~Engine();  // stops a running scheduler (StopMode::kAbort)
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Serving: the scheduler's calls (scheduler.h has their contracts).
  Status start() { return scheduler_->start(); }
  Result<runtime::RequestHandle> submit(runtime::Request request) {
    return scheduler_->submit(std::move(request));
  }
  bool cancel(const std::string& id) { return scheduler_->cancel(id); }
  runtime::SchedulerLoad load() const { return scheduler_->load(); }
  void close_admission() { scheduler_->close_admission(); }
  size_t in_flight() const { return scheduler_->in_flight(); }
  void stop(runtime::StopMode mode = runtime::StopMode::kDrain) { scheduler_->stop(mode); }
  void fail(Status reason) { scheduler_->fail(std::move(reason)); }
  Status failure() const { return scheduler_->failure(); }
  const runtime::SchedulerLimits& limits() const { return scheduler_->limits(); }
  bool prefix_caching() const { return scheduler_->prefix_caching(); }
  runtime::KvEventLog& kv_events() { return scheduler_->kv_events(); }
  Result<runtime::PrefixCacheDrop> drop_prefix_cache(std::chrono::milliseconds wait) {
    return scheduler_->drop_prefix_cache(wait);
  }
  // The model files against what was opened (model::check_checkpoint_files). Any thread.
  Status check_files() const { return model::check_checkpoint_files(checkpoint_); }

  // What was built.
  const model::Checkpoint& checkpoint() const { return checkpoint_; }
  const model::ModelSpec& spec() const { return *checkpoint_.spec; }
  const placement::StartupPlacement& placement() const { return placement_; }
  const tokenizer::Tokenizer* tokenizer() const { return tokenizer_.get(); }  // null: none
  const ModelFacts& facts() const { return facts_; }
  const GpuServing& gpu() const { return gpu_; }
  runtime::Scheduler& scheduler() { return *scheduler_; }
  const runtime::Scheduler& scheduler() const { return *scheduler_; }

  // Direct forward passes, for callers that run the model themselves instead of serving it
  // (`tandem logits`, `generate`, `bench`): only while the scheduler is not running.
  runtime::ModelRunner& runner() { return scheduler_->runner(); }
  // A KV cache for one sequence of up to `positions` positions that the runner as built takes:
  // a private one, or with the dense parts on the GPU one of the scheduler's pool (its blocks go
  // back to the pool when the cache is destroyed, which must happen before the engine is).
  // FAILED_PRECONDITION while the scheduler runs; RESOURCE_EXHAUSTED when the pool is too small.
  Result<std::unique_ptr<runtime::KvCache>> sequence_cache(size_t positions);

 private:
  Engine() = default;

  model::Checkpoint checkpoint_;
  placement::StartupPlacement placement_;
  GpuServing gpu_;  // before the scheduler: its runner points into the GPU expert worker
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  OwnedDirectory tokenizer_export_;
  std::unique_ptr<runtime::Scheduler> scheduler_;
  ModelFacts facts_;
  // Blocks of sequence_cache()'s caches when the dense parts are on the GPU.
  std::unique_ptr<runtime::KvBlockAllocator> offline_allocator_;
  runtime::SeqId offline_sequences_ = 0;
};

}  // namespace tandem::engine
