// The engine half of tandemd's start: the forward runner, the scheduler over it, the tokenizer,
// the tokenizer directory the gateway reads, and the facts GetModelInfo reports.
#pragma once

#include <memory>

#include "config/config.h"
#include "engine/base/file_replace.h"
#include "engine/base/result.h"
#include "engine/runtime/scheduler.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/model_startup.h"
#include "server/serving_context.h"

namespace tandem::server {

// Owned by main; the scheduler views `model`'s weights, so `model` must outlive it.
struct ServingEngine {
  // Declared before the scheduler so that it is destroyed after it: the runner points into it.
  GpuServing gpu;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;  // null when the checkpoint has none
  OwnedDirectory tokenizer_export;  // the exported tokenizer's private directory, if one was made
  std::unique_ptr<runtime::Scheduler> scheduler;  // created, not started
  ServedModelInfo info;
  GenerateMappingLimits mapping_limits;
};

// Builds the runner (runtime.threads), the scheduler (runtime.* budgets, server.max_* bounds,
// model.context_length), attaches what runs on the GPU (attach_gpu with `gpu`) and loads the
// tokenizer; prepares the tokenizer directory
// (model.tokenizer_dir, see docs/configuration.md). `observer` (may be null) receives the routing
// of every forward pass. Errors name the configuration key or the path at fault.
Result<ServingEngine> start_engine(const config::Config& config, const StartedModel& model,
                                   runtime::RoutingObserver* observer, const GpuProbe& gpu = {});

}  // namespace tandem::server
