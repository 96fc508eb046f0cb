// The model's tokenizer and the gateway's tokenizer directory.
#include "engine/facade/tokenizer_directory.h"

#include <climits>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "engine/model/gguf_file.h"
#include "engine/model/gguf_split.h"
#include "engine/tokenizer/tokenizer_export.h"

namespace tandem::engine {
namespace {

namespace fs = std::filesystem;

bool is_directory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

}  // namespace

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

Result<std::unique_ptr<tokenizer::Tokenizer>> load_model_tokenizer(const std::string& path) {
  if (is_directory(path)) {
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

Result<std::string> tokenizer_directory(const EngineOptions& options, OwnedDirectory& created) {
  const std::string& configured = options.tokenizer_dir;
  std::error_code ec;
  if (!configured.empty() && fs::is_regular_file(fs::path(configured) / "tokenizer.json", ec)) {
    return absolute_path(configured);  // provided by the operator
  }
  if (is_directory(options.model_path)) {
    if (configured.empty()) return absolute_path(options.model_path);
    return invalid_argument_error("model.tokenizer_dir: '" + configured +
                                  "' has no tokenizer.json");
  }
  TANDEM_ASSIGN_OR_RETURN(model::GgufFile file, model::GgufFile::open(options.model_path));
  TANDEM_ASSIGN_OR_RETURN(tokenizer::HfTokenizerFiles files, tokenizer::export_hf_tokenizer(file));
  std::string target = configured;
  if (target.empty()) {
    const std::string prefix =
        "tandemd-tokenizer-" +
        model::strip_gguf_shard_suffix(fs::path(options.model_path).stem().string()) + "-";
    Result<std::string> made = create_fresh_directory(options.tokenizer_export_parent, prefix);
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

}  // namespace tandem::engine
