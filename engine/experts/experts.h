// The experts module's public header: routing, the ExpertWorker interface, the CPU worker and the
// MoE layer executor.
#pragma once

#include "engine/experts/cpu_expert_worker.h"  // IWYU pragma: export
#include "engine/experts/expert_worker.h"      // IWYU pragma: export
#include "engine/experts/moe_layer.h"          // IWYU pragma: export
#include "engine/experts/moe_layer_timings.h"  // IWYU pragma: export
#include "engine/experts/pooled_matmul.h"      // IWYU pragma: export
#include "engine/experts/routing.h"            // IWYU pragma: export
