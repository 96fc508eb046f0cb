// Tests of YAML configuration files: values, file:line in every message, and every kind of
// malformed file (invalid YAML, non-map sections, duplicates, unknown keys, unreadable files).
#include <catch2/catch.hpp>
#include <string>

#include "config/config_fields.h"
#include "config/config_loader.h"
#include "tests/config/temp_file.h"

namespace tandem::config {
namespace {

using testing::TempFile;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

Result<LoadedConfig> load_yaml(const TempFile& file) {
  ConfigSources sources;
  sources.file_path = file.path();
  return load_config(sources);
}

std::string yaml_error(const std::string& yaml) {
  const TempFile file(yaml);
  const Result<LoadedConfig> r = load_yaml(file);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  // Every message names the file.
  CHECK(contains(r.status().message(), file.path()));
  // Report the message relative to the file so that cases can compare "FILE:line".
  std::string message = r.status().message();
  for (size_t at; (at = message.find(file.path())) != std::string::npos;) {
    message.replace(at, file.path().size(), "FILE");
  }
  return message;
}

// The example names every key with its default, except the two that point the serve command at
// the demo model the repository ships.
TEST_CASE("the example config/tandem.yaml sets every key, each to its default", "[config]") {
  ConfigSources sources;
  sources.file_path = std::string(TANDEM_SOURCE_DIR) + "/config/tandem.yaml";
  const Result<LoadedConfig> r = load_config(sources);
  REQUIRE(r.ok());
  const Config defaults;
  for (const FieldDescriptor& field : config_fields()) {
    INFO(field.key());
    CHECK(r->sources[field_index(field)].kind == SourceKind::kFile);
    CHECK(format_field_value(field, r->config) == format_field_value(field, defaults));
  }
  // An empty model.path is what makes tandemd serve the embedded demo model.
  CHECK(r->config.model.path.empty());
}

TEST_CASE("YAML values of every kind are read", "[config]") {
  const TempFile file(
      "server:\n"
      "  host: \"::\"\n"
      "  api_keys: [\"abcdefgh-1\", abcdefgh-2]\n"
      "  tls_cert_file:\n"
      "model:\n"
      "  path: /models/Qwen3-30B-A3B-Q4_K_M.gguf\n"
      "  format: gguf\n"
      "placement:\n"
      "  policy: uniform\n"
      "  gpu_memory_budget: 40GiB\n"
      "  num_gpu_experts: 128\n"
      "runtime:\n"
      "  kv_cache_bytes: 1073741824\n"
      "  dense_device: cpu\n"
      "  cuda_device: 1\n"
      "logging:\n"
      "  level: warn\n"
      "metrics:\n");
  const Result<LoadedConfig> r = load_yaml(file);
  REQUIRE(r.ok());
  const Config& c = r->config;
  CHECK(c.server.host == "::");
  CHECK(c.server.api_keys == std::vector<std::string>{"abcdefgh-1", "abcdefgh-2"});
  CHECK(c.server.tls_cert_file.empty());
  CHECK(c.model.path == "/models/Qwen3-30B-A3B-Q4_K_M.gguf");
  CHECK(c.model.format == ModelFormat::kGguf);
  CHECK(c.placement.policy == PlacementPolicy::kUniform);
  CHECK(c.placement.gpu_memory_budget == 40ULL << 30);
  CHECK(c.placement.num_gpu_experts == 128);
  CHECK(c.runtime.kv_cache_bytes == 1ULL << 30);
  CHECK(c.runtime.dense_device == DenseDevice::kCpu);
  CHECK(c.runtime.cuda_device == 1);
  CHECK(c.logging.level == LogLevel::kWarn);
  CHECK(r->source_of("model.format").to_string() == file.path() + ":7");
}

TEST_CASE("an empty or comment-only file sets nothing", "[config]") {
  for (const char* yaml : {"", "# nothing here\n", "---\n"}) {
    const TempFile file(yaml);
    const Result<LoadedConfig> r = load_yaml(file);
    REQUIRE(r.ok());
    CHECK(r->source_of("server.port").to_string() == "default");
  }
}

TEST_CASE("YAML errors name file:line, the key and what is wrong", "[config]") {
  struct Case {
    const char* yaml;
    const char* says;
  };
  const Case cases[] = {
      // Unknown keys and sections, with suggestions.
      {"server:\n  prot: 1\n", "FILE:2: unknown key 'server.prot' (did you mean 'server.port'?)"},
      {"placement:\n  threads: 4\n",
       "FILE:2: unknown key 'placement.threads' (did you mean 'runtime.threads'?)"},
      {"sever:\n  port: 1\n", "FILE:1: unknown section 'sever' (did you mean 'server'?)"},
      {"server.port: 1\n", "FILE:1: unknown section 'server.port': keys are nested"},
      // Wrong types.
      {"server:\n  port: abc\n", "FILE:2: server.port: expected an integer, got 'abc'"},
      {"server:\n  port: 1.5\n", "FILE:2: server.port: expected an integer, got '1.5'"},
      {"server:\n  port: [1, 2]\n", "FILE:2: server.port: expected integer, 1..65535, got a list"},
      {"server:\n  port:\n", "FILE:2: server.port: expected integer, 1..65535, got nothing"},
      {"server:\n  host: {a: 1}\n", "FILE:2: server.host: expected string, not empty, got a map"},
      {"server:\n  api_keys: abcdefghij\n",
       "FILE:2: server.api_keys: expected a list of strings such as"},
      {"server:\n  api_keys: [[a]]\n", "FILE:2: server.api_keys: expected a list of strings"},
      // Ranges, enums and sizes.
      {"\nserver:\n  port: 0\n", "FILE:3: server.port: 0 is out of range 1..65535"},
      {"runtime:\n  threads: -2\n", "FILE:2: runtime.threads: -2 is out of range 0..4096"},
      {"model:\n  context_length: -1\n", "model.context_length: -1 is out of range"},
      {"model:\n  format: onnx\n",
       "FILE:2: model.format: 'onnx' is not one of: auto, gguf, safetensors"},
      {"logging:\n  format: xml\n", "FILE:2: logging.format: 'xml' is not one of: text, json"},
      {"runtime:\n  dense_device: tpu\n",
       "FILE:2: runtime.dense_device: 'tpu' is not one of: auto, cpu, gpu"},
      {"runtime:\n  cuda_device: -1\n", "runtime.cuda_device: -1 is out of range 0..1023"},
      {"placement:\n  gpu_memory_budget: 40GB2\n",
       "placement.gpu_memory_budget: unknown size unit"},
      {"placement:\n  gpu_memory_budget: -1GiB\n", "must not be negative"},
      // Structure.
      {"server: 8080\n", "FILE:1: section 'server' must be a map of keys, got the scalar '8080'"},
      {"server:\n  - port\n", "section 'server' must be a map of keys, got a list"},
      {"- server\n", "FILE:1: the top level must be a map of sections"},
      {"server:\n  port: 1\n  port: 2\n", "FILE:3: duplicate key 'port' (first set on line 2)"},
      {"server:\n  port: 1\nserver:\n  host: x\n", "FILE:3: duplicate key 'server'"},
      // Invalid YAML, with the line.
      {"server:\n  port: 1\n  host: [unclosed\n", "invalid YAML"},
      {"server:\n  port: 1\n    host: x\n", "FILE:3: invalid YAML"},
      {"server:\n  port: 1\n  host: a: b\n", "FILE:3: invalid YAML"},
  };
  for (const Case& c : cases) {
    INFO(c.yaml);
    const std::string message = yaml_error(c.yaml);
    INFO(message);
    CHECK(contains(message, c.says));
  }
}

TEST_CASE("all YAML problems of a file are reported together", "[config]") {
  const std::string message = yaml_error(
      "server:\n"
      "  port: x\n"
      "  hots: a\n"
      "runtime:\n"
      "  threads: -1\n");
  CHECK(contains(message, "FILE:2: server.port"));
  CHECK(contains(message, "FILE:3: unknown key 'server.hots' (did you mean 'server.host'?)"));
  CHECK(contains(message, "FILE:5: runtime.threads"));
}

TEST_CASE("a missing or unreadable file is NOT_FOUND naming the path", "[config]") {
  ConfigSources sources;
  sources.file_path = "/nonexistent/tandem-config-test.yaml";
  Result<LoadedConfig> r = load_config(sources);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kNotFound);
  CHECK(contains(r.status().message(),
                 "cannot read config file '/nonexistent/tandem-config-test.yaml': No such file"));

  const TempFile file("server: {}\n");
  sources.file_path = file.dir();
  r = load_config(sources);
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.status().message(), "it is a directory"));
}

}  // namespace
}  // namespace tandem::config
