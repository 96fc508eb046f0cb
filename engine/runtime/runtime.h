// The runtime module's forward-pass public header: ModelRunner, batch types and KV caches.
#pragma once

#include "engine/runtime/batch.h"           // IWYU pragma: export
#include "engine/runtime/kv_cache.h"        // IWYU pragma: export
#include "engine/runtime/model_runner.h"    // IWYU pragma: export
#include "engine/runtime/paged_kv_cache.h"  // IWYU pragma: export
