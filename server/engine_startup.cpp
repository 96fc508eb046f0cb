// start_engine: runner + scheduler + tokenizer + tokenizer directory + model facts.
#include "server/engine_startup.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "engine/model/architecture.h"
#include "engine/model/gguf_file.h"
#include "engine/runtime/model_runner.h"
#include "engine/tokenizer/tokenizer_export.h"

namespace tandem::server {
namespace {

namespace fs = std::filesystem;

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

bool is_hf_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

std::string served_name(const config::Config& config) {
  if (!config.model.served_name.empty()) return config.model.served_name;
  fs::path p = fs::path(config.model.path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  return is_hf_dir(config.model.path) ? p.filename().string() : p.stem().string();
}

Result<std::unique_ptr<tokenizer::Tokenizer>> load_model_tokenizer(const std::string& path) {
  if (is_hf_dir(path)) {
    std::error_code ec;
    if (!fs::is_regular_file(fs::path(path) / "tokenizer.json", ec)) {
      spdlog::warn("{} has no tokenizer.json: text input and stop strings are unavailable", path);
      return std::unique_ptr<tokenizer::Tokenizer>();
    }
    TANDEM_ASSIGN_OR_RETURN(tokenizer::Tokenizer t, tokenizer::Tokenizer::load_hf(path));
    return std::make_unique<tokenizer::Tokenizer>(std::move(t));
  }
  TANDEM_ASSIGN_OR_RETURN(tokenizer::Tokenizer t, tokenizer::Tokenizer::load_gguf(path));
  return std::make_unique<tokenizer::Tokenizer>(std::move(t));
}

// The directory reported as tokenizer_path (see model.tokenizer_dir in docs/configuration.md).
// For a GGUF file without a configured directory the tokenizer is exported into a new private
// directory under $TMPDIR, owned by `created` (removed when tandemd ends): a fixed name there
// could be planted by another local user.
Result<std::string> tokenizer_directory(const config::Config& config, OwnedDirectory& created) {
  const std::string& configured = config.model.tokenizer_dir;
  std::error_code ec;
  if (!configured.empty() && fs::is_regular_file(fs::path(configured) / "tokenizer.json", ec)) {
    return absolute_path(configured);  // provided by the operator
  }
  if (is_hf_dir(config.model.path)) {
    if (configured.empty()) return absolute_path(config.model.path);
    return invalid_argument_error("model.tokenizer_dir: '" + configured +
                                  "' has no tokenizer.json");
  }
  TANDEM_ASSIGN_OR_RETURN(model::GgufFile file, model::GgufFile::open(config.model.path));
  TANDEM_ASSIGN_OR_RETURN(tokenizer::HfTokenizerFiles files, tokenizer::export_hf_tokenizer(file));
  std::string target = configured;
  if (target.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    const std::string parent = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    const std::string prefix =
        "tandemd-tokenizer-" + fs::path(config.model.path).stem().string() + "-";
    Result<std::string> made = create_fresh_directory(parent, prefix);
    if (!made.ok()) {
      return Status(made.status().code(),
                    "model.tokenizer_dir is empty and the tokenizer export directory: " +
                        made.status().message());
    }
    target = made.value();
    created = OwnedDirectory(target);
  }
  const Status written = tokenizer::write_hf_tokenizer_dir(files, target);
  if (!written.ok()) {
    return Status(written.code(), "model.tokenizer_dir: " + written.message());
  }
  spdlog::info("exported the GGUF tokenizer for the gateway to {}", target);
  return absolute_path(target);
}

// eos_token_id of <dir>/generation_config.json (an id or a list of ids), which Hugging Face
// generation stops on and the gateway reads too; empty when absent or unreadable.
std::vector<int32_t> generation_config_eos(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "generation_config.json");
  if (!in) return {};
  const nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("eos_token_id")) return {};
  const nlohmann::json& eos = json["eos_token_id"];
  std::vector<int32_t> ids;
  auto add = [&](const nlohmann::json& v) {
    if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX) {
      ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
  };
  if (eos.is_array()) {
    for (const nlohmann::json& v : eos) add(v);
  } else {
    add(eos);
  }
  return ids;
}

}  // namespace

Result<ServingEngine> start_engine(const config::Config& config, const StartedModel& model,
                                   runtime::RoutingObserver* observer, const GpuProbe& gpu) {
  const model::ModelSpec& spec = *model.checkpoint.spec;
  ServingEngine engine;
  TANDEM_ASSIGN_OR_RETURN(engine.tokenizer, load_model_tokenizer(config.model.path));

  runtime::RunnerOptions runner_options;
  runner_options.threads = config.runtime.threads;
  runner_options.context_length = static_cast<size_t>(config.model.context_length);
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<runtime::ModelRunner> runner,
      runtime::ModelRunner::create(spec, *model.checkpoint.weights, runner_options));
  const int64_t context = static_cast<int64_t>(runner->context_length());

  runtime::SchedulerOptions options;
  options.limits.max_batch_tokens = config.runtime.max_batch_tokens;
  options.limits.prefill_chunk_tokens = config.runtime.prefill_chunk_tokens;
  options.limits.max_running = config.server.max_running_requests;
  options.limits.context_length = context;
  options.kv_budget_bytes = static_cast<int64_t>(config.runtime.kv_cache_bytes);
  options.prefix_caching = config.runtime.prefix_caching;
  // The engine's queue bounds the requests in flight (running and waiting); the configuration
  // counts the waiting ones beyond a full batch (server.max_queued_requests).
  options.queue_capacity = static_cast<size_t>(config.server.max_queued_requests) +
                           static_cast<size_t>(config.server.max_running_requests);
  if (spec.eos_token_id.has_value()) {
    options.eos_token_ids.push_back(static_cast<int32_t>(*spec.eos_token_id));
  }
  if (engine.tokenizer != nullptr && engine.tokenizer->eos_id().has_value()) {
    options.eos_token_ids.push_back(*engine.tokenizer->eos_id());
  }
  if (engine.tokenizer != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(engine.info.tokenizer_path,
                            tokenizer_directory(config, engine.tokenizer_export));
    for (const int32_t id : generation_config_eos(engine.info.tokenizer_path)) {
      if (id < static_cast<int32_t>(spec.vocab_size)) options.eos_token_ids.push_back(id);
    }
  }
  std::sort(options.eos_token_ids.begin(), options.eos_token_ids.end());
  options.eos_token_ids.erase(
      std::unique(options.eos_token_ids.begin(), options.eos_token_ids.end()),
      options.eos_token_ids.end());
  options.tokenizer = engine.tokenizer.get();
  options.routing_observer = observer;
  // After every forward pass: a model file truncated or rewritten under its mapping fails the
  // scheduler instead of serving garbage (model.load_mode: read has no file to watch).
  options.weights_check = [&checkpoint = model.checkpoint] {
    return model::check_checkpoint_files(checkpoint);
  };
  engine.info.eos_token_ids = options.eos_token_ids;
  Result<std::unique_ptr<runtime::Scheduler>> scheduler =
      runtime::Scheduler::create(std::move(runner), std::move(options));
  if (!scheduler.ok()) {
    return Status(scheduler.status().code(),
                  "runtime / server limits: " + scheduler.status().message());
  }
  engine.scheduler = std::move(scheduler).value();
  TANDEM_ASSIGN_OR_RETURN(
      engine.gpu, attach_gpu(config, model.checkpoint, model.placement, gpu, *engine.scheduler));

  ServedModelInfo& info = engine.info;
  info.model_path = absolute_path(config.model.path);
  info.served_model_name = served_name(config);
  const model::ArchitectureTraits& traits = model::traits(spec.architecture);
  info.model_type = std::string(traits.hf_model_type);
  info.architectures = {std::string(traits.hf_class)};
  info.context_length = context;
  info.vocab_size = static_cast<int64_t>(spec.vocab_size);
  if (spec.bos_token_id.has_value()) info.bos_token_id = static_cast<int32_t>(*spec.bos_token_id);
  if (engine.tokenizer != nullptr && engine.tokenizer->pad_id().has_value()) {
    info.pad_token_id = *engine.tokenizer->pad_id();
  }
  engine.mapping_limits.context_length = context;
  return engine;
}

}  // namespace tandem::server
