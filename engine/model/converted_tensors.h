// Tensors a checkpoint reader derives at open from the file's own (a re-layout or a type Tandem
// computes with), which replace their sources in the checkpoint's tensor list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/mapped_file.h"
#include "engine/model/tensor_info.h"

namespace tandem::model {

struct ConvertedTensors {
  std::vector<TensorInfo> tensors;    // the derived tensors; data points into `buffers`
  std::vector<std::string> replaced;  // names of the file tensors they replace
  // The converted bytes, each in a mapping of its own (OwnedCopy: what is repacked from them is
  // freed once start-up is done, model::drop_released_copies). Moving this object (or the vector)
  // keeps every `data` view valid.
  std::vector<OwnedCopy> buffers;
};

}  // namespace tandem::model
