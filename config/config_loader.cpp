// load_config(): defaults, then the YAML file, then TANDEM_* variables, then flags; every error
// collected and reported together with its source.
#include "config/config_loader.h"

#include <algorithm>

#include "base/check.h"
#include "config/config_fields.h"
#include "config/peer_network.h"
#include "config/value_text.h"
#include "config/yaml_source.h"

namespace tandem::config {

namespace {

constexpr std::string_view kEnvPrefix = "TANDEM_";
constexpr size_t kMinApiKeyLength = 8;

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) {
    if (!out.empty()) out += '\n';
    out += line;
  }
  return out;
}

// Sets one field from text, recording the source or the error line.
void apply_text(const FieldDescriptor& field, const std::string& text, ValueSource source,
                LoadedConfig& loaded, std::vector<std::string>& errors) {
  const Status status = set_field_from_text(field, text, loaded.config);
  if (!status.ok()) {
    errors.push_back(source.to_string() + ": " + field.key() + ": " + status.message());
    return;
  }
  loaded.sources[field_index(field)] = std::move(source);
}

// The section whose TANDEM_<SECTION>_ prefix `name` starts with, or nullptr.
const SectionDescriptor* env_section(std::string_view name) {
  for (const SectionDescriptor& s : config_sections()) {
    std::string prefix(kEnvPrefix);
    for (const char c : s.name) prefix += static_cast<char>(c - 'a' + 'A');
    prefix += '_';
    if (name.starts_with(prefix)) return &s;
  }
  return nullptr;
}

void apply_environment(const std::map<std::string, std::string>& environment, LoadedConfig& loaded,
                       std::vector<std::string>& errors) {
  std::vector<std::string> known_names;
  for (const FieldDescriptor& f : config_fields()) {
    known_names.push_back(f.env_name());
    if (!f.env_alias.empty()) known_names.emplace_back(f.env_alias);
  }
  // Short aliases first so that the long TANDEM_<SECTION>_<KEY> form wins when both are set.
  for (const FieldDescriptor& f : config_fields()) {
    if (f.env_alias.empty()) continue;
    const auto it = environment.find(std::string(f.env_alias));
    if (it == environment.end()) continue;
    apply_text(f, it->second, ValueSource{SourceKind::kEnvironment, it->first}, loaded, errors);
  }
  for (const FieldDescriptor& f : config_fields()) {
    const auto it = environment.find(f.env_name());
    if (it == environment.end()) continue;
    apply_text(f, it->second, ValueSource{SourceKind::kEnvironment, it->first}, loaded, errors);
  }
  for (const auto& [name, value] : environment) {
    if (!name.starts_with(kEnvPrefix)) continue;
    if (std::find(known_names.begin(), known_names.end(), name) != known_names.end()) continue;
    if (env_section(name) == nullptr) continue;  // Not ours (e.g. TANDEM_SOURCE_DIR): ignored.
    const std::string suggestion = nearest_spelling(name, known_names);
    errors.push_back("env " + name + ": unknown configuration variable" +
                     (suggestion.empty() ? std::string() : " (did you mean " + suggestion + "?)"));
  }
}

void apply_flags(const std::vector<FlagOverride>& flags, LoadedConfig& loaded,
                 std::vector<std::string>& errors) {
  for (const FlagOverride& flag : flags) {
    const FieldDescriptor* field = find_field(flag.key);
    if (field == nullptr) {
      const std::string suggestion = suggest_key(flag.key);
      errors.push_back(
          "flag --" + flag.key + ": unknown key '" + flag.key + "'" +
          (suggestion.empty() ? std::string() : " (did you mean --" + suggestion + "?)"));
      continue;
    }
    apply_text(*field, flag.value, ValueSource{SourceKind::kFlag, field->flag_name()}, loaded,
               errors);
  }
}

// The rules that span keys. `sources` (may be null) adds where each named key was set.
std::vector<std::string> cross_field_errors(const Config& config,
                                            const std::vector<ValueSource>* sources) {
  const auto name = [sources](std::string_view key) {
    std::string out(key);
    if (sources != nullptr) {
      out += " (" + (*sources)[field_index(*find_field(key))].to_string() + ")";
    }
    return out;
  };
  std::vector<std::string> errors;
  const ServerConfig& server = config.server;
  if (server.tls_cert_file.empty() != server.tls_key_file.empty()) {
    errors.push_back(name("server.tls_cert_file") + " and " + name("server.tls_key_file") +
                     " must be set together (TLS needs both)");
  }
  if (!server.tls_client_ca_file.empty() && server.tls_cert_file.empty()) {
    errors.push_back(name("server.tls_client_ca_file") +
                     " (mutual TLS) needs server.tls_cert_file and server.tls_key_file");
  }
  for (const std::string& key : server.api_keys) {
    if (key.size() < kMinApiKeyLength) {
      errors.push_back(name("server.api_keys") + ": every key must be at least " +
                       std::to_string(kMinApiKeyLength) + " characters long");
      break;
    }
  }
  for (const std::string& peer : server.trusted_peers) {
    const Result<PeerNetwork> network = parse_peer_network(peer);
    if (!network.ok())
      errors.push_back(name("server.trusted_peers") + ": " + network.status().message());
  }
  if (!server.trusted_peers.empty() && server.api_keys.empty()) {
    errors.push_back(name("server.trusted_peers") +
                     " is set but server.api_keys is empty: without keys every peer is already "
                     "allowed; set api_keys or remove trusted_peers");
  }
  if (config.metrics.port != 0 && config.metrics.port == server.port) {
    errors.push_back(name("metrics.port") + " " + std::to_string(config.metrics.port) +
                     " must differ from " + name("server.port") + " (or be 0 to disable metrics)");
  }
  if (config.runtime.prefill_chunk_tokens > config.runtime.max_batch_tokens) {
    errors.push_back(name("runtime.prefill_chunk_tokens") + " = " +
                     std::to_string(config.runtime.prefill_chunk_tokens) + " must not exceed " +
                     name("runtime.max_batch_tokens") + " = " +
                     std::to_string(config.runtime.max_batch_tokens));
  }
  return errors;
}

}  // namespace

std::string ValueSource::to_string() const {
  switch (kind) {
    case SourceKind::kDefault:
      return "default";
    case SourceKind::kFile:
      return where;
    case SourceKind::kEnvironment:
      return "env " + where;
    case SourceKind::kFlag:
      return "flag " + where;
  }
  return where;
}

const ValueSource& LoadedConfig::source_of(std::string_view key) const {
  const FieldDescriptor* field = find_field(key);
  TANDEM_CHECK_MSG(field != nullptr, "source_of: not a configuration key");
  return sources.at(field_index(*field));
}

Result<LoadedConfig> load_config(const ConfigSources& sources) {
  LoadedConfig loaded;
  loaded.sources.resize(config_fields().size());
  std::vector<std::string> errors;
  bool file_unreadable = false;
  if (!sources.file_path.empty()) {
    internal::apply_yaml_file(sources.file_path, loaded.config, loaded.sources, errors,
                              file_unreadable);
  }
  apply_environment(sources.environment, loaded, errors);
  apply_flags(sources.flags, loaded, errors);
  if (errors.empty()) errors = cross_field_errors(loaded.config, &loaded.sources);
  if (errors.empty()) return loaded;
  if (file_unreadable && errors.size() == 1) return not_found_error(errors.front());
  return invalid_argument_error(join_lines(errors));
}

Status validate_config(const Config& config) {
  const std::vector<std::string> errors = cross_field_errors(config, nullptr);
  if (errors.empty()) return Status();
  return invalid_argument_error(join_lines(errors));
}

}  // namespace tandem::config
