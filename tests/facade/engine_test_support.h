// What the Engine tests share: the demo model's options and the count of visible GPU devices.
#pragma once

#include <string>
#include <vector>

#include "engine/facade/engine.h"
#include "engine/gpu/gpu_backend.h"

namespace tandem::engine {

inline const std::string kDemo = std::string(TANDEM_SOURCE_DIR) + "/models/demo/demo-moe-q8_0.gguf";
inline const std::string kDemoStats =
    std::string(TANDEM_SOURCE_DIR) + "/models/demo/activation-stats.json";

inline EngineOptions demo_options(DenseDevice dense = DenseDevice::kCpu) {
  EngineOptions o;
  o.model_path = kDemo;
  o.dense_device = dense;
  o.threads = 1;
  o.export_tokenizer = false;
  return o;
}

inline int visible_devices() {
  const Result<std::vector<gpu::DeviceInfo>> devices = gpu::list_devices();
  return devices.ok() ? static_cast<int>(devices->size()) : 0;
}

}  // namespace tandem::engine
