// Hardened JSON loading for Hugging Face files (config.json, generation_config.json, indexes and
// safetensors headers): bounded size, bounded nesting depth, duplicate keys rejected.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/result.h"

namespace tandem::model {

inline constexpr int kJsonDefaultMaxDepth = 64;
inline constexpr uint64_t kHfJsonMaxFileBytes = 64ull << 20;  // config.json, index json

// Parses `text` as one JSON document. INVALID_ARGUMENT, messages prefixed with `what` (e.g. the
// file name), when the text is not valid UTF-8 JSON, nests deeper than `max_depth` (checked before
// parsing, so no recursion depends on the input), or repeats a key inside one object (the message
// names the key). Never throws. Pure function; any thread.
Result<nlohmann::json> parse_json_strict(std::string_view text, std::string_view what,
                                         int max_depth = kJsonDefaultMaxDepth);

// Reads and parses a JSON file of at most `max_bytes` bytes with parse_json_strict. NOT_FOUND when
// it does not exist; RESOURCE_EXHAUSTED when it is larger than the cap. Messages name the path.
Result<nlohmann::json> load_json_file(const std::string& path,
                                      uint64_t max_bytes = kHfJsonMaxFileBytes,
                                      int max_depth = kJsonDefaultMaxDepth);

}  // namespace tandem::model
