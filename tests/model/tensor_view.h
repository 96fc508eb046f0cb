// Test helper: a TensorInfo viewing bytes the test owns, as a checkpoint reader would list it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/model/tensor_info.h"

namespace tandem::model::testing {

// A tensor named `name` of `type` and `shape` viewing `bytes` (kept alive by the caller), in the
// file "memory".
inline TensorInfo tensor_view(std::string name, TensorType type, std::vector<uint64_t> shape,
                              const std::vector<uint8_t>& bytes) {
  TensorInfo t;
  t.name = std::move(name);
  t.type = type;
  t.n_elements = 1;
  for (uint64_t d : shape) t.n_elements *= d;
  t.shape = std::move(shape);
  t.data = std::span<const uint8_t>(bytes.data(), bytes.size());
  t.file = "memory";
  return t;
}

}  // namespace tandem::model::testing
