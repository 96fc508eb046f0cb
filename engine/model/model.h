// The model module's public header: open a checkpoint, read its ModelSpec and bound weights.
#pragma once

#include "engine/model/architecture.h"   // IWYU pragma: export
#include "engine/model/checkpoint.h"     // IWYU pragma: export
#include "engine/model/model_spec.h"     // IWYU pragma: export
#include "engine/model/model_weights.h"  // IWYU pragma: export
#include "engine/model/weight_names.h"   // IWYU pragma: export
