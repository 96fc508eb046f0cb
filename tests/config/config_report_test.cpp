// Tests of --print-config output (values with provenance, secrets redacted, loads back), the
// generated reference and its copy in docs/configuration.md, and the startup summary.
#include "config/config_report.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "config/config_fields.h"
#include "tests/config/temp_file.h"

namespace tandem::config {
namespace {

using testing::TempFile;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The line of `text` that starts (after indentation) with `prefix`.
std::string line_starting(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t start = line.find_first_not_of(' ');
    if (start != std::string::npos && line.compare(start, prefix.size(), prefix) == 0) {
      return line;
    }
  }
  return "";
}

TEST_CASE("print-config shows every value with where it came from", "[config]") {
  const TempFile file("server:\n  host: 0.0.0.0\nruntime:\n  kv_cache_bytes: 512MiB\n");
  ConfigSources sources;
  sources.file_path = file.path();
  sources.environment = {{"TANDEM_NUM_GPU_EXPERTS", "32"},
                         {"TANDEM_SERVER_API_KEYS", "secret-key-1,secret-key-2"}};
  sources.flags = {{"logging.format", "json"}};
  const Result<LoadedConfig> loaded = load_config(sources);
  REQUIRE(loaded.ok());
  const std::string text = render_resolved_config(*loaded);

  CHECK(contains(line_starting(text, "host: \"0.0.0.0\""), "# " + file.path() + ":2"));
  CHECK(contains(line_starting(text, "kv_cache_bytes: 512MiB"), "# " + file.path() + ":4"));
  CHECK(contains(line_starting(text, "num_gpu_experts: 32"), "# env TANDEM_NUM_GPU_EXPERTS"));
  CHECK(contains(line_starting(text, "format: json"), "# flag --logging.format"));
  CHECK(contains(line_starting(text, "port: 50051"), "# default"));
  // Secrets never appear; their count does.
  CHECK_FALSE(contains(text, "secret-key"));
  CHECK(contains(line_starting(text, "api_keys:"), "[\"<redacted>\", \"<redacted>\"]"));
  // One line per key plus one per section and the heading.
  const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  CHECK(lines == 1 + config_sections().size() + config_fields().size());
}

TEST_CASE("print-config output loads back to the same configuration", "[config]") {
  ConfigSources sources;
  sources.flags = {{"model.path", "/m/a \"quoted\" name.gguf"},
                   {"placement.gpu_memory_budget", "1.5GB"},
                   {"placement.policy", "budget"},
                   {"runtime.threads", "7"}};
  const Result<LoadedConfig> first = load_config(sources);
  REQUIRE(first.ok());
  const TempFile file(render_resolved_config(*first));
  ConfigSources again;
  again.file_path = file.path();
  const Result<LoadedConfig> second = load_config(again);
  REQUIRE(second.ok());
  for (const FieldDescriptor& field : config_fields()) {
    INFO(field.key());
    CHECK(format_field_value(field, second->config) == format_field_value(field, first->config));
  }
  CHECK(second->config.model.path == "/m/a \"quoted\" name.gguf");
}

TEST_CASE("the reference documents every key with type, default, variable and flag", "[config]") {
  const std::string reference = render_config_reference();
  for (const FieldDescriptor& field : config_fields()) {
    INFO(field.key());
    CHECK(contains(reference, "### `" + field.key() + "`"));
    CHECK(contains(reference, "`" + field.env_name() + "`"));
    CHECK(contains(reference, "`" + field.flag_name() + "=VALUE`"));
    CHECK_FALSE(field.doc.empty());
  }
  CHECK(contains(reference, "- Default: `50051`"));
  CHECK(contains(reference, "- Default: `1GiB`"));
  CHECK(contains(reference, "- Type: one of: frequency, uniform, budget"));
  CHECK(contains(reference, "`TANDEM_PLACEMENT_NUM_GPU_EXPERTS` or `TANDEM_NUM_GPU_EXPERTS`"));
  CHECK(contains(reference, "`TANDEM_PLACEMENT_NUM_GPU_EXPERTS` wins"));
}

TEST_CASE("docs/configuration.md is the generated reference", "[config]") {
  const std::string path = std::string(TANDEM_SOURCE_DIR) + "/docs/configuration.md";
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream contents;
  contents << in.rdbuf();
  INFO(
      "docs/configuration.md is stale; regenerate it with "
      "build/server/tandemd --config-reference > docs/configuration.md");
  CHECK(contents.str() == render_config_reference());
}

TEST_CASE("the startup summary has one line per section and no secrets", "[config]") {
  Config c;
  c.server.api_keys = {"very-secret-key"};
  c.server.tls_cert_file = "c.pem";
  c.server.tls_key_file = "k.pem";
  c.server.host = "::1";
  c.metrics.port = 0;
  c.runtime.threads = 12;
  const std::vector<std::string> lines = config_summary_lines(c);
  REQUIRE(lines.size() == config_sections().size());
  CHECK(contains(lines[0], "server: [::1]:50051, TLS on, auth 1 API key(s)"));
  CHECK(lines[1] == "metrics: off");
  CHECK(contains(lines[4], "threads 12"));
  CHECK(contains(lines[4], "KV cache 1GiB"));
  CHECK(contains(lines[4], "dense parts auto, CUDA device 0"));
  for (const std::string& line : lines) CHECK_FALSE(contains(line, "very-secret-key"));
}

}  // namespace
}  // namespace tandem::config
