// apply_embedded_default: find models/demo and point the configuration at it.
#include "server/embedded_default.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace tandem::server {
namespace {

namespace fs = std::filesystem;

constexpr const char* kModelFile = "demo-moe-q8_0.gguf";
constexpr const char* kHfDir = "hf";
constexpr const char* kStatsFile = "activation-stats.json";

}  // namespace

std::vector<std::string> embedded_model_dirs(const std::string& executable_path) {
  std::vector<std::string> dirs;
  if (const char* data = std::getenv("TANDEM_DATA_DIR"); data != nullptr && *data != '\0') {
    dirs.push_back((fs::path(data) / "models" / "demo").string());
  }
  std::error_code ec;
  const fs::path exe = fs::canonical(executable_path, ec);
  if (!ec) {
    dirs.push_back(
        (exe.parent_path().parent_path() / "share" / "tandem" / "models" / "demo").string());
  }
  dirs.push_back((fs::path(TANDEM_DEFAULT_SOURCE_DIR) / "models" / "demo").string());
  return dirs;
}

Result<std::string> apply_embedded_default(config::Config& config,
                                           const std::string& executable_path) {
  if (!config.model.path.empty()) return std::string();
  const std::vector<std::string> dirs = embedded_model_dirs(executable_path);
  std::string looked;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    const fs::path model = fs::path(dir) / kModelFile;
    if (!fs::is_regular_file(model, ec)) {
      looked += (looked.empty() ? "" : ", ") + model.string();
      continue;
    }
    config.model.path = model.string();
    if (config.model.tokenizer_dir.empty() &&
        fs::is_regular_file(fs::path(dir) / kHfDir / "tokenizer.json", ec)) {
      config.model.tokenizer_dir = (fs::path(dir) / kHfDir).string();
    }
    if (config.placement.stats_path.empty() &&
        fs::is_regular_file(fs::path(dir) / kStatsFile, ec)) {
      config.placement.stats_path = (fs::path(dir) / kStatsFile).string();
    }
    if (config.model.served_name.empty()) config.model.served_name = "tandem-demo";
    return dir;
  }
  return not_found_error(
      "no model configured (model.path) and the embedded demo model was not "
      "found; looked for " +
      looked);
}

}  // namespace tandem::server
