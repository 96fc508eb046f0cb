// Internal helpers of the GGUF reader: wire sizes, little-endian loads, UTF-8 validation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/model/gguf_file.h"

namespace tandem::model {

// Bytes of a fixed-size metadata value type; 0 for STRING, ARRAY and unknown ids.
inline size_t gguf_scalar_size(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    default:
      return 0;
  }
}

// Loads `width` (1, 2, 4 or 8) bytes as an unsigned little-endian integer; `p` needs no alignment.
inline uint64_t read_le(const uint8_t* p, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code points > U+10FFFF).
bool is_valid_utf8(std::string_view s);

}  // namespace tandem::model
