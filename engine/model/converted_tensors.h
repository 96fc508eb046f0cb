// Tensors a checkpoint reader derives at open from the file's own (a re-layout or a type Tandem
// computes with), which replace their sources in the checkpoint's tensor list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/tensor_info.h"

namespace tandem::model {

struct ConvertedTensors {
  std::vector<TensorInfo> tensors;    // the derived tensors; data points into `buffers`
  std::vector<std::string> replaced;  // names of the file tensors they replace
  // The converted bytes. Moving this object (or the vector) keeps every `data` view valid.
  std::vector<std::vector<uint8_t>> buffers;
};

}  // namespace tandem::model
