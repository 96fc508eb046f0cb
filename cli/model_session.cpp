// Shared model set-up for the logits / generate / bench subcommands.
#include "cli/model_session.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <system_error>

namespace tandem::cli {

engine::EngineOptions session_engine_options(const std::string& path,
                                             const SessionOptions& options) {
  engine::EngineOptions o;
  o.model_path = path;
  o.placement.policy = placement::PlacementPolicy::kUniform;
  o.placement.num_gpu_experts = options.gpu_experts;
  o.dense_device = options.dense_gpu ? engine::DenseDevice::kGpu : engine::DenseDevice::kCpu;
  o.threads = options.threads;
  o.kv_cache_type = options.kv_cache_type;
  o.limits.max_batch_tokens = options.max_batch_tokens;
  o.limits.max_running = 1;  // one sequence of direct passes (bench --concurrency sets its own)
  o.limits.prefill_chunk_tokens =
      std::min<int64_t>(o.limits.prefill_chunk_tokens, options.max_batch_tokens);
  // The commands load the tokenizer themselves, and only when they need one.
  o.load_tokenizer = false;
  o.export_tokenizer = false;
  o.watch_files = false;
  o.free_copied_sources = !options.keep_copied_sources;
  return o;
}

Result<std::unique_ptr<ModelSession>> open_session(const std::string& path,
                                                   const SessionOptions& options) {
  auto session = std::make_unique<ModelSession>();
  TANDEM_ASSIGN_OR_RETURN(session->engine,
                          engine::Engine::create(session_engine_options(path, options)));
  return session;
}

Result<tokenizer::Tokenizer> load_tokenizer(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    if (!std::filesystem::is_regular_file(std::filesystem::path(path) / "tokenizer.json", ec)) {
      return not_found_error(path + " has no tokenizer.json");
    }
    return tokenizer::Tokenizer::load_hf(path);
  }
  return tokenizer::Tokenizer::load_gguf(path);
}

Result<std::vector<int32_t>> parse_token_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c)) || c == ',') {
      ++i;
      continue;
    }
    int32_t value = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + i, text.data() + text.size(), value);
    if (ec != std::errc() || value < 0) {
      return invalid_argument_error("bad token id list '" + text + "' at offset " +
                                    std::to_string(i));
    }
    ids.push_back(value);
    i = static_cast<size_t>(ptr - text.data());
  }
  if (ids.empty()) return invalid_argument_error("empty token id list");
  return ids;
}

Result<int> parse_count(const char* flag, const std::string& text) {
  int value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < 0) {
    return invalid_argument_error(std::string(flag) + " wants a non-negative integer, not '" +
                                  text + "'");
  }
  return value;
}

Result<kernels::KvType> parse_kv_cache_type(const std::string& text) {
  if (const auto type = kernels::parse_kv_type(text)) return *type;
  std::string choices;
  for (const std::string_view name : kernels::kv_type_names()) {
    choices += (choices.empty() ? "" : ", ") + std::string(name);
  }
  return invalid_argument_error("--kv-cache-type: '" + text + "' is not one of: " + choices);
}

}  // namespace tandem::cli
