// load_config(): builds the Config from defaults, a YAML file, TANDEM_* environment variables
// and --section.key flags, in that order of increasing precedence, and records where each value
// came from. All inputs are injected (the caller snapshots the environment), so the loader
// touches no process state except reading the named YAML file. Thread-safe (no shared state).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "config/config.h"

namespace tandem::config {

// Where one value came from.
enum class SourceKind { kDefault, kFile, kEnvironment, kFlag };

struct ValueSource {
  SourceKind kind = SourceKind::kDefault;
  // kFile: "path:line"; kEnvironment: the variable name; kFlag: the flag as "--section.key".
  std::string where;

  // "default", "tandem.yaml:12", "env TANDEM_SERVER_PORT", "flag --server.port".
  std::string to_string() const;
};

// One --section.key=value (or "--section.key value") from the command line.
struct FlagOverride {
  std::string key;    // "server.port"
  std::string value;  // "8080"
};

struct ConfigSources {
  // YAML file to read; empty = none.
  std::string file_path;
  // A snapshot of the environment. Only names starting with TANDEM_ are looked at:
  // TANDEM_<SECTION>_<KEY> for every key, the listed short aliases (TANDEM_NUM_GPU_EXPERTS),
  // and any other TANDEM_<SECTION>_* for a real section is an error. Other TANDEM_* names are
  // ignored.
  std::map<std::string, std::string> environment;
  // Command-line overrides, applied in order (a later one for the same key wins).
  std::vector<FlagOverride> flags;
};

struct LoadedConfig {
  Config config;
  // One per entry of config_fields(), same order.
  std::vector<ValueSource> sources;

  // The source of the value of `key`; TANDEM_CHECKs that the key exists.
  const ValueSource& source_of(std::string_view key) const;
};

// Loads and validates. Every problem found is reported, one per line of the INVALID_ARGUMENT
// (or NOT_FOUND for a missing file) message, each line naming the source ("file:line",
// "env VAR", "flag --x.y"), the key and what is wrong, with a suggestion for unknown keys.
Result<LoadedConfig> load_config(const ConfigSources& sources);

// Checks between fields (TLS key with certificate, distinct ports, chunk within batch). Each
// range is already checked when a value is set; this covers rules that span keys.
Status validate_config(const Config& config);

}  // namespace tandem::config
