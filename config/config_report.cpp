// --print-config, --config-reference and the startup summary, all driven by the field table.
#include "config/config_report.h"

#include "config/config_fields.h"
#include "config/value_text.h"

namespace tandem::config {

namespace {

constexpr size_t kCommentColumn = 44;

constexpr const char* kReferenceIntro = R"(# Configuration reference

<!-- Generated from the field table in config/config_fields.cpp; do not edit by hand.
     Regenerate with:  build/server/tandemd --config-reference > docs/configuration.md
     config_test fails while this file differs from the generated text. -->

`tandemd` reads its configuration once, at start, from these sources; each one overrides the
ones before it:

1. the built-in defaults listed below;
2. a YAML file named with `--config FILE` (`config/tandem.yaml` is the annotated example);
3. environment variables `TANDEM_<SECTION>_<KEY>`, e.g. `TANDEM_SERVER_PORT=8080`;
4. command-line flags `--section.key=value` or `--section.key value`, e.g. `--server.port=8080`.

Rules:

- Keys are `section.key`; in YAML each section is a map (`server:` then `port: 8080` indented).
- A bad configuration is refused before anything starts: `tandemd` exits with code 2 and prints
  one line per problem naming its source (`file:line`, `env VAR` or `flag --x.y`), the key and
  what is wrong. Unknown keys (with the nearest valid key suggested), values of the wrong type,
  out of range or not among the allowed choices, duplicate YAML keys, and YAML that does not
  parse are all errors.
- Environment: a variable `TANDEM_<SECTION>_...` whose section is one of the sections below but
  which names no key is an error. Other `TANDEM_*` variables are ignored.
- `TANDEM_NUM_GPU_EXPERTS` is a short form of `TANDEM_PLACEMENT_NUM_GPU_EXPERTS` (the
  KTransformers habit). When both are set, `TANDEM_PLACEMENT_NUM_GPU_EXPERTS` wins.
- `TANDEM_CPU_KERNELS` is a short form of `TANDEM_RUNTIME_CPU_KERNELS` (the `tandem` tool reads
  it too). When both are set, `TANDEM_RUNTIME_CPU_KERNELS` wins.
- Lists (`server.api_keys`) are YAML lists in the file and comma-separated text in the
  environment and on the command line.
- Byte sizes accept a plain number of bytes or a number with a unit: `B`, `KB`/`MB`/`GB`/`TB`
  (powers of 1000), `KiB`/`MiB`/`GiB`/`TiB` or `K`/`M`/`G`/`T` (powers of 1024), e.g. `40GiB`,
  `512MiB`, `1.5GB`. Units are case-insensitive; the result must be a whole number of bytes.
- `tandemd --print-config` prints the resolved configuration with the source of every value.
)";

std::string pad_to(std::string text, size_t column) {
  if (text.size() < column)
    text.append(column - text.size(), ' ');
  else
    text += ' ';
  return text;
}

std::string endpoint(const std::string& host, int port) {
  // An IPv6 literal needs brackets before the port.
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

}  // namespace

std::string render_resolved_config(const LoadedConfig& loaded) {
  std::string out = "# tandemd configuration as resolved; after each value, where it came from.\n";
  std::string_view section;
  for (const FieldDescriptor& field : config_fields()) {
    if (field.section != section) {
      section = field.section;
      out += std::string(section) + ":\n";
    }
    const std::string line =
        "  " + std::string(field.name) + ": " + format_field_value(field, loaded.config);
    out +=
        pad_to(line, kCommentColumn) + "# " + loaded.sources[field_index(field)].to_string() + "\n";
  }
  return out;
}

std::string render_config_reference() {
  const Config defaults;
  std::string out = kReferenceIntro;
  for (const SectionDescriptor& section : config_sections()) {
    out += "\n## `" + std::string(section.name) + "`\n\n" + std::string(section.doc) + "\n";
    for (const FieldDescriptor& field : config_fields()) {
      if (field.section != section.name) continue;
      out += "\n### `" + field.key() + "`\n\n";
      out += std::string(field.doc) + "\n\n";
      out += "- Type: " + field_type_description(field) + "\n";
      out += "- Default: `" + format_field_value(field, defaults) + "`\n";
      out += "- Environment: `" + field.env_name() + "`";
      if (!field.env_alias.empty()) out += " or `" + std::string(field.env_alias) + "`";
      out += "\n- Flag: `" + field.flag_name() + "=VALUE`\n";
    }
  }
  return out;
}

std::vector<std::string> config_summary_lines(const Config& config) {
  std::vector<std::string> lines;
  const ServerConfig& s = config.server;
  const std::string tls = s.tls_cert_file.empty()        ? "off"
                          : s.tls_client_ca_file.empty() ? "on"
                                                         : "mutual";
  const std::string auth =
      s.api_keys.empty() ? "off" : std::to_string(s.api_keys.size()) + " API key(s)";
  lines.push_back("server: " + endpoint(s.host, s.port) + ", TLS " + tls + ", auth " + auth +
                  ", queue " + std::to_string(s.max_queued_requests) + ", running " +
                  std::to_string(s.max_running_requests) + ", shutdown grace " +
                  std::to_string(s.shutdown_grace_seconds) + "s");
  lines.push_back("metrics: " + (config.metrics.port == 0
                                     ? std::string("off")
                                     : endpoint(config.metrics.host, config.metrics.port)));
  const ModelConfig& m = config.model;
  lines.push_back(
      "model: " + (m.path.empty() ? std::string("(none)") : quote_string(m.path)) + ", format " +
      std::string(enum_name(m.format)) + ", served name " +
      (m.served_name.empty() ? std::string("(from path)") : quote_string(m.served_name)) +
      ", context " +
      (m.context_length == 0 ? std::string("(from model)") : std::to_string(m.context_length)));
  const PlacementConfig& p = config.placement;
  lines.push_back("placement: " + std::string(enum_name(p.policy)) + ", " +
                  std::to_string(p.num_gpu_experts) + " GPU experts, GPU budget " +
                  (p.gpu_memory_budget == 0 ? std::string("(all free)")
                                            : format_byte_size(p.gpu_memory_budget)) +
                  ", stats " +
                  (p.stats_path.empty() ? std::string("(none)") : quote_string(p.stats_path)));
  const RuntimeConfig& r = config.runtime;
  lines.push_back(
      "runtime: threads " +
      (r.threads == 0 ? std::string("(all cores)") : std::to_string(r.threads)) + ", batch " +
      std::to_string(r.max_batch_tokens) + " tokens, prefill chunk " +
      std::to_string(r.prefill_chunk_tokens) + ", KV cache " + format_byte_size(r.kv_cache_bytes) +
      " of " + std::string(enum_name(r.kv_cache_type)) + ", dense parts " +
      std::string(enum_name(r.dense_device)) + ", CUDA device " + std::to_string(r.cuda_device) +
      ", CPU kernels " + std::string(enum_name(r.cpu_kernels)) +
      (r.repack_weights ? ", repacked weights" : ", weights as mapped") +
      (r.numa ? "" : ", NUMA placement off"));
  lines.push_back("logging: " + std::string(enum_name(config.logging.level)) + ", " +
                  std::string(enum_name(config.logging.format)));
  return lines;
}

}  // namespace tandem::config
