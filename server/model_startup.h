// The model half of tandemd's start: open the configured checkpoint and plan the expert
// placement once, before anything is served.
#pragma once

#include "config/config.h"
#include "engine/base/result.h"
#include "engine/model/checkpoint.h"
#include "engine/placement/placement_startup.h"

namespace tandem::server {

struct StartedModel {
  model::Checkpoint checkpoint;
  placement::StartupPlacement placement;
};

// Opens config.model.path (a runnable model is required) and plans the placement from
// config.placement. Errors name the path: FAILED_PRECONDITION when no model is configured,
// the checkpoint reader's or the planner's error otherwise. Logs the model summary and the
// placement table (spdlog). Blocking I/O; call from main before any serving thread starts.
Result<StartedModel> start_model(const config::Config& config);

}  // namespace tandem::server
