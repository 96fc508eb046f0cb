// libFuzzer target: parses the input as one whole .safetensors file image.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/model/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  tandem::Result<tandem::model::SafetensorsContents> r =
      tandem::model::parse_safetensors(bytes, "fuzz.safetensors");
  if (r.ok()) {
    // Touch every tensor's bytes so that a view outside the input trips ASan.
    uint64_t sum = 0;
    for (const tandem::model::TensorInfo& t : r->tensors) {
      if (!t.data.empty()) sum += t.data.front() + t.data.back();
      if (t.data.data() < data || t.data.data() + t.data.size() > data + size) __builtin_trap();
    }
    for (const auto& [k, v] : r->metadata) sum += k.size() + v.size();
    static volatile uint64_t sink;
    sink = sum;
  }
  return 0;
}
