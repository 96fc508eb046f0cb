// The field table: one descriptor per configuration key (section, name, range, documentation,
// where the value lives in Config). YAML loading, environment variables, flags, --print-config
// and the generated reference are all driven by this one table, so a key is declared once.
// The table is immutable static data; every function here is thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"
#include "config/config.h"

namespace tandem::config {

// Where one field lives inside a Config. The pointee type decides the field's kind.
using FieldRef = std::variant<std::string*, int*, uint64_t*, bool*, std::vector<std::string>*,
                              ModelFormat*, PlacementPolicy*, LogLevel*, LogFormat*, DenseDevice*,
                              LoadMode*, CpuKernels*, kernels::KvType*>;

// kBool values are spelled true or false (YAML 1.2's booleans; also in variables and flags).
enum class FieldKind { kString, kInteger, kByteSize, kBool, kStringList, kEnum };

struct SectionDescriptor {
  std::string_view name;  // "server"
  std::string_view doc;   // One paragraph for the reference.
};

struct FieldDescriptor {
  std::string_view section = {};  // "server"
  std::string_view name = {};     // "port"
  std::string_view doc = {};      // What the value means, including what 0 / "" means.
  // Inclusive range for kInteger and kByteSize fields; ignored for the other kinds.
  int64_t min_value = 0;
  int64_t max_value = 0;
  // kString: the empty string is refused.
  bool non_empty = false;
  // The value is never printed (--print-config shows "<redacted>").
  bool secret = false;
  // A second, shorter environment variable name ("TANDEM_NUM_GPU_EXPERTS"), or "". When both
  // are set the long TANDEM_<SECTION>_<KEY> form wins.
  std::string_view env_alias = {};
  // Returns the location of this field inside `config`.
  FieldRef (*ref)(Config& config) = nullptr;

  std::string key() const;        // "server.port"
  std::string env_name() const;   // "TANDEM_SERVER_PORT"
  std::string flag_name() const;  // "--server.port"
};

// All sections and all fields, in the order they are documented and printed.
std::span<const SectionDescriptor> config_sections();
std::span<const FieldDescriptor> config_fields();

// The field for "section.name", or nullptr.
const FieldDescriptor* find_field(std::string_view key);
// The index of `field` in config_fields().
size_t field_index(const FieldDescriptor& field);

FieldKind field_kind(const FieldDescriptor& field);
// The allowed spellings of an enum field; empty for other kinds.
std::span<const std::string_view> field_choices(const FieldDescriptor& field);
// "integer, 1..65535", "byte size, 0..1TiB", "one of: auto, gguf, safetensors", ...
std::string field_type_description(const FieldDescriptor& field);

// Parses `text` (a YAML scalar, an environment value or a flag value) for this field, checks
// the range / choices / emptiness and stores it in `config`. Lists are comma-separated. On error
// `config` is unchanged and the INVALID_ARGUMENT message says what is wrong with the value (the
// caller adds the source and key).
Status set_field_from_text(const FieldDescriptor& field, std::string_view text, Config& config);
// Stores a list value (a YAML sequence) in a kStringList field.
void set_field_list(const FieldDescriptor& field, std::vector<std::string> items, Config& config);

// The value as YAML text: strings quoted, sizes with units ("1GiB"), lists as ["a", "b"].
// Secret fields print every item as "<redacted>".
std::string format_field_value(const FieldDescriptor& field, const Config& config);

// Among all keys, the one nearest to `unknown_key` (a plausible misspelling), or "".
std::string suggest_key(std::string_view unknown_key);
// Among the section names, the nearest to `unknown_section`, or "".
std::string suggest_section(std::string_view unknown_section);

}  // namespace tandem::config
