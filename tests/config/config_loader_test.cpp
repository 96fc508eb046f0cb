// Tests of load_config(): precedence of defaults < file < environment < flags, provenance, and
// the errors of the environment and flag sources (the YAML ones are in yaml_source_test.cpp).
#include "config/config_loader.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "config/config_fields.h"
#include "tests/config/temp_file.h"

namespace tandem::config {
namespace {

using testing::TempFile;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The message of a load that must fail.
std::string load_error(const ConfigSources& sources) {
  const Result<LoadedConfig> r = load_config(sources);
  REQUIRE_FALSE(r.ok());
  return r.status().message();
}

TEST_CASE("with no sources every field has its documented default", "[config]") {
  const Result<LoadedConfig> r = load_config({});
  REQUIRE(r.ok());
  const Config& c = r->config;
  CHECK(c.server.host == "127.0.0.1");
  CHECK(c.server.port == 50051);
  CHECK(c.server.api_keys.empty());
  CHECK(c.server.max_queued_requests == 256);
  CHECK(c.metrics.port == 9090);
  CHECK(c.model.format == ModelFormat::kAuto);
  CHECK(c.placement.policy == PlacementPolicy::kFrequency);
  CHECK(c.placement.num_gpu_experts == 0);
  CHECK(c.runtime.kv_cache_bytes == (1ULL << 30));
  CHECK(c.logging.level == LogLevel::kInfo);
  CHECK(c.logging.format == LogFormat::kText);
  REQUIRE(r->sources.size() == config_fields().size());
  for (const ValueSource& s : r->sources) CHECK(s.to_string() == "default");
}

TEST_CASE("precedence is default < file < environment < flag", "[config]") {
  const TempFile file(
      "server:\n"
      "  port: 1111\n"
      "  host: 0.0.0.0\n"
      "runtime:\n"
      "  threads: 3\n"
      "  kv_cache_bytes: 2GiB\n");
  ConfigSources sources;
  sources.file_path = file.path();
  sources.environment = {{"TANDEM_SERVER_PORT", "2222"}, {"TANDEM_RUNTIME_THREADS", "5"}};
  sources.flags = {{"server.port", "3333"}};
  const Result<LoadedConfig> r = load_config(sources);
  REQUIRE(r.ok());
  CHECK(r->config.server.port == 3333);       // flag over env over file
  CHECK(r->config.runtime.threads == 5);      // env over file
  CHECK(r->config.server.host == "0.0.0.0");  // file over default
  CHECK(r->config.runtime.kv_cache_bytes == 2ULL << 30);
  CHECK(r->config.runtime.max_batch_tokens == 2048);  // default
  CHECK(r->source_of("server.port").to_string() == "flag --server.port");
  CHECK(r->source_of("runtime.threads").to_string() == "env TANDEM_RUNTIME_THREADS");
  CHECK(r->source_of("server.host").to_string() == file.path() + ":3");
  CHECK(r->source_of("runtime.kv_cache_bytes").to_string() == file.path() + ":6");
  CHECK(r->source_of("runtime.max_batch_tokens").to_string() == "default");
}

TEST_CASE("a later flag for the same key wins", "[config]") {
  ConfigSources sources;
  sources.flags = {{"runtime.threads", "2"}, {"runtime.threads", "9"}};
  const Result<LoadedConfig> r = load_config(sources);
  REQUIRE(r.ok());
  CHECK(r->config.runtime.threads == 9);
}

TEST_CASE("TANDEM_NUM_GPU_EXPERTS sets placement.num_gpu_experts; the long form wins", "[config]") {
  ConfigSources sources;
  sources.environment = {{"TANDEM_NUM_GPU_EXPERTS", "48"}};
  Result<LoadedConfig> r = load_config(sources);
  REQUIRE(r.ok());
  CHECK(r->config.placement.num_gpu_experts == 48);
  CHECK(r->source_of("placement.num_gpu_experts").to_string() == "env TANDEM_NUM_GPU_EXPERTS");

  sources.environment["TANDEM_PLACEMENT_NUM_GPU_EXPERTS"] = "16";
  r = load_config(sources);
  REQUIRE(r.ok());
  CHECK(r->config.placement.num_gpu_experts == 16);
  CHECK(r->source_of("placement.num_gpu_experts").to_string() ==
        "env TANDEM_PLACEMENT_NUM_GPU_EXPERTS");

  sources.flags = {{"placement.num_gpu_experts", "8"}};
  r = load_config(sources);
  REQUIRE(r.ok());
  CHECK(r->config.placement.num_gpu_experts == 8);
}

TEST_CASE("TANDEM_CPU_KERNELS sets runtime.cpu_kernels", "[config]") {
  ConfigSources sources;
  Result<LoadedConfig> r = load_config(sources);
  REQUIRE(r.ok());
  CHECK(r->config.runtime.cpu_kernels == CpuKernels::kAuto);
  sources.environment = {{"TANDEM_CPU_KERNELS", "scalar"}};
  r = load_config(sources);
  REQUIRE(r.ok());
  CHECK(r->config.runtime.cpu_kernels == CpuKernels::kScalar);
  CHECK(r->source_of("runtime.cpu_kernels").to_string() == "env TANDEM_CPU_KERNELS");
  sources.environment["TANDEM_RUNTIME_CPU_KERNELS"] = "avx512";
  r = load_config(sources);
  REQUIRE(r.ok());
  CHECK(r->config.runtime.cpu_kernels == CpuKernels::kAvx512);
}

TEST_CASE("runtime.kv_cache_type: f16 unless set, f32 from a variable or a flag", "[config]") {
  ConfigSources sources;
  Result<LoadedConfig> r = load_config(sources);
  REQUIRE(r.ok());
  CHECK(r->config.runtime.kv_cache_type == kernels::KvType::kF16);
  sources.environment = {{"TANDEM_RUNTIME_KV_CACHE_TYPE", "f32"}};
  r = load_config(sources);
  REQUIRE(r.ok());
  CHECK(r->config.runtime.kv_cache_type == kernels::KvType::kF32);
  sources.environment.clear();
  sources.flags = {{"runtime.kv_cache_type", "f32"}};
  r = load_config(sources);
  REQUIRE(r.ok());
  CHECK(r->config.runtime.kv_cache_type == kernels::KvType::kF32);
}

TEST_CASE("environment and flag values of every kind are parsed", "[config]") {
  ConfigSources sources;
  sources.environment = {{"TANDEM_SERVER_API_KEYS", "first-key-123, second-key-456"},
                         {"TANDEM_PLACEMENT_GPU_MEMORY_BUDGET", "1.5GB"},
                         {"TANDEM_LOGGING_FORMAT", "json"},
                         {"TANDEM_MODEL_PATH", "/models/qwen3.gguf"}};
  sources.flags = {{"placement.policy", "budget"}, {"logging.level", "debug"}};
  const Result<LoadedConfig> r = load_config(sources);
  REQUIRE(r.ok());
  CHECK(r->config.server.api_keys == std::vector<std::string>{"first-key-123", "second-key-456"});
  CHECK(r->config.placement.gpu_memory_budget == 1500000000ULL);
  CHECK(r->config.logging.format == LogFormat::kJson);
  CHECK(r->config.model.path == "/models/qwen3.gguf");
  CHECK(r->config.placement.policy == PlacementPolicy::kBudget);
  CHECK(r->config.logging.level == LogLevel::kDebug);
}

TEST_CASE("unknown TANDEM_<SECTION>_* variables are errors with a suggestion", "[config]") {
  ConfigSources sources;
  sources.environment = {{"TANDEM_SERVER_PROT", "1"}};
  const std::string message = load_error(sources);
  CHECK(contains(message, "env TANDEM_SERVER_PROT: unknown configuration variable"));
  CHECK(contains(message, "did you mean TANDEM_SERVER_PORT?"));
}

TEST_CASE("other TANDEM_* and non-TANDEM variables are ignored", "[config]") {
  ConfigSources sources;
  sources.environment = {{"TANDEM_SOURCE_DIR", "/x"},
                         {"TANDEM_HOME", "/y"},
                         {"PATH", "/usr/bin"},
                         {"SERVER_PORT", "nonsense"}};
  const Result<LoadedConfig> r = load_config(sources);
  REQUIRE(r.ok());
  CHECK(r->config.server.port == 50051);
}

TEST_CASE("bad environment values name the variable, the key and the problem", "[config]") {
  struct Case {
    const char* variable;
    const char* value;
    const char* says;
  };
  const Case cases[] = {
      {"TANDEM_SERVER_PORT", "http", "env TANDEM_SERVER_PORT: server.port: expected an integer"},
      {"TANDEM_SERVER_PORT", "70000", "server.port: 70000 is out of range 1..65535"},
      {"TANDEM_RUNTIME_THREADS", "-1", "runtime.threads: -1 is out of range 0..4096"},
      {"TANDEM_NUM_GPU_EXPERTS", "-4",
       "env TANDEM_NUM_GPU_EXPERTS: placement.num_gpu_experts: -4 is out of range"},
      {"TANDEM_SERVER_MAX_QUEUED_REQUESTS", "0", "server.max_queued_requests: 0 is out of range"},
      {"TANDEM_PLACEMENT_POLICY", "random",
       "placement.policy: 'random' is not one of: frequency, uniform, budget"},
      {"TANDEM_LOGGING_LEVEL", "verbose",
       "'verbose' is not one of: trace, debug, info, warn, error, critical, off"},
      {"TANDEM_RUNTIME_KV_CACHE_BYTES", "4 GiBs", "unknown size unit 'GiBs'"},
      {"TANDEM_RUNTIME_KV_CACHE_BYTES", "1KiB", "1KiB is out of range 1MiB.."},
      {"TANDEM_PLACEMENT_GPU_MEMORY_BUDGET", "-2GiB", "must not be negative"},
      {"TANDEM_SERVER_HOST", "", "server.host: must not be empty"},
      {"TANDEM_CPU_KERNELS", "sse",
       "env TANDEM_CPU_KERNELS: runtime.cpu_kernels: 'sse' is not one of: auto, scalar, avx2, "
       "avx512"},
      {"TANDEM_RUNTIME_KV_CACHE_TYPE", "q8_0",
       "runtime.kv_cache_type: 'q8_0' is not one of: f32, f16"},
  };
  for (const Case& c : cases) {
    INFO(c.variable << "=" << c.value);
    ConfigSources sources;
    sources.environment = {{c.variable, c.value}};
    const std::string message = load_error(sources);
    CHECK(contains(message, c.says));
    CHECK(contains(message, std::string("env ") + c.variable));
  }
}

TEST_CASE("bad flags name the flag, the key and the problem", "[config]") {
  ConfigSources sources;
  sources.flags = {{"server.prot", "1"}};
  std::string message = load_error(sources);
  CHECK(contains(message, "flag --server.prot: unknown key 'server.prot'"));
  CHECK(contains(message, "did you mean --server.port?"));

  sources.flags = {{"placement.threads", "4"}};
  CHECK(contains(load_error(sources), "did you mean --runtime.threads?"));

  sources.flags = {{"model.format", "onnx"}};
  message = load_error(sources);
  CHECK(contains(message,
                 "flag --model.format: model.format: 'onnx' is not one of: auto, gguf, "
                 "safetensors"));

  sources.flags = {{"runtime.max_batch_tokens", "lots"}};
  CHECK(contains(load_error(sources),
                 "flag --runtime.max_batch_tokens: runtime.max_batch_tokens: expected an "
                 "integer, got 'lots'"));
}

TEST_CASE("every problem is reported, one per line", "[config]") {
  ConfigSources sources;
  sources.environment = {{"TANDEM_SERVER_PORT", "x"}};
  sources.flags = {{"runtime.threads", "-3"}, {"nope.key", "1"}};
  const std::string message = load_error(sources);
  CHECK(contains(message, "env TANDEM_SERVER_PORT"));
  CHECK(contains(message, "flag --runtime.threads"));
  CHECK(contains(message, "flag --nope.key"));
  CHECK(std::count(message.begin(), message.end(), '\n') == 2);
}

TEST_CASE("rules between keys are checked and name where each key was set", "[config]") {
  ConfigSources sources;
  sources.flags = {{"server.tls_cert_file", "/etc/tandem/cert.pem"}};
  std::string message = load_error(sources);
  CHECK(contains(message,
                 "server.tls_cert_file (flag --server.tls_cert_file) and "
                 "server.tls_key_file (default) must be set together"));

  sources.flags = {{"server.tls_client_ca_file", "/etc/tandem/ca.pem"}};
  CHECK(contains(load_error(sources), "needs server.tls_cert_file"));

  sources.flags = {{"metrics.port", "50051"}};
  CHECK(contains(load_error(sources), "must differ from server.port"));

  sources.flags = {{"runtime.prefill_chunk_tokens", "4096"}};
  CHECK(contains(load_error(sources), "must not exceed runtime.max_batch_tokens (default)"));

  sources.flags = {{"server.api_keys", "short"}};
  CHECK(contains(load_error(sources), "at least 8 characters"));

  sources.flags = {{"server.trusted_peers", "127.0.0.1"}};
  CHECK(contains(load_error(sources),
                 "server.trusted_peers (flag --server.trusted_peers) is set but server.api_keys "
                 "is empty"));
  sources.flags = {{"server.api_keys", "long-enough-key"},
                   {"server.trusted_peers", "127.0.0.1/32,10.0.0.1/8"}};
  CHECK(contains(load_error(sources), "'10.0.0.1/8' has bits set past its /8 prefix"));
  sources.flags = {{"server.api_keys", "long-enough-key"}, {"server.trusted_peers", "localhost"}};
  CHECK(contains(load_error(sources), "'localhost' is not an IPv4 or IPv6 address"));

  sources.flags = {
      {"server.tls_cert_file", "c.pem"},       {"server.tls_key_file", "k.pem"},
      {"server.tls_client_ca_file", "ca.pem"}, {"metrics.port", "0"},
      {"server.api_keys", "long-enough-key"},  {"server.trusted_peers", "127.0.0.1,::1/128"}};
  CHECK(load_config(sources).ok());
}

TEST_CASE("validate_config accepts the defaults", "[config]") {
  CHECK(validate_config(Config{}).ok());
  Config bad;
  bad.runtime.max_batch_tokens = 100;
  CHECK_FALSE(validate_config(bad).ok());
}

}  // namespace
}  // namespace tandem::config
