// GgufParser: internal; fills a GgufFile from untrusted bytes (header, metadata, tensor infos).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "engine/model/gguf_file.h"

namespace tandem::model {

class GgufParser {
 public:
  // Parses `file.bytes_` (already set, with `file.name_`) into the rest of `file`. Every read is
  // bounds-checked against the bytes; errors name file, field and offset.
  static Status run(GgufFile& file, const GgufLimits& limits);

 private:
  class Impl;  // the per-section decoders; nested so that it shares GgufFile's friendship
};

}  // namespace tandem::model
