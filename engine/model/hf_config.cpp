// Hardened JSON loading: a depth pre-scan, then nlohmann's parser with a duplicate-key callback.
#include "engine/model/hf_config.h"

#include <string>
#include <unordered_set>
#include <vector>

#include "engine/model/mapped_file.h"

namespace tandem::model {

namespace {

// The deepest bracket nesting outside strings, stopping early past `limit`. Linear, no recursion.
// On malformed text the number is only an upper bound on what the parser would reach, which is
// what matters: the parser never nests deeper than this.
int max_nesting(std::string_view text, int limit, size_t* where) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
      if (depth > deepest) {
        deepest = depth;
        if (deepest > limit) {
          *where = i;
          return deepest;
        }
      }
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

Result<nlohmann::json> parse_json_strict(std::string_view text, std::string_view what,
                                         int max_depth) {
  const std::string prefix(what);
  size_t where = 0;
  if (max_nesting(text, max_depth, &where) > max_depth) {
    return invalid_argument_error(prefix + ": JSON nests deeper than " + std::to_string(max_depth) +
                                  " levels (at byte " + std::to_string(where) + ")");
  }
  // One key set per open object; keys are checked against the innermost one.
  std::vector<std::unordered_set<std::string>> open_objects;
  std::string duplicate;
  auto callback = [&](int /*depth*/, nlohmann::json::parse_event_t event,
                      nlohmann::json& parsed) -> bool {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) {
      open_objects.emplace_back();
    } else if (event == Event::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == Event::key && !open_objects.empty() && duplicate.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second) duplicate = key;
    }
    return true;
  };
  nlohmann::json result;
  try {
    result = nlohmann::json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                                   /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument_error(prefix + ": invalid JSON: " + e.what());
  } catch (const std::exception& e) {
    return invalid_argument_error(prefix + ": cannot parse JSON: " + e.what());
  }
  if (!duplicate.empty()) {
    return invalid_argument_error(prefix + ": duplicate key \"" + duplicate + "\"");
  }
  return result;
}

Result<nlohmann::json> load_json_file(const std::string& path, uint64_t max_bytes, int max_depth) {
  TANDEM_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  if (file.size() > max_bytes) {
    return resource_exhausted_error(path + ": " + std::to_string(file.size()) +
                                    " bytes, more than the limit of " + std::to_string(max_bytes) +
                                    " for a JSON file");
  }
  const auto bytes = file.bytes();
  return parse_json_strict(
      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path, max_depth);
}

}  // namespace tandem::model
