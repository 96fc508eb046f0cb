// Confinement of DumpActivationStats paths to the statistics output directory.
#include "server/stats_dump_path.h"

#include <filesystem>
#include <system_error>

namespace tandem::server {

namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxPathBytes = 4096;

// True when `inner` equals `root` or lies below it, component by component (both canonical).
bool is_within(const fs::path& root, const fs::path& inner) {
  auto r = root.begin();
  auto i = inner.begin();
  for (; r != root.end(); ++r, ++i) {
    if (i == inner.end() || *r != *i) return false;
  }
  return true;
}

Result<fs::path> canonical_dir(const fs::path& dir, const std::string& what) {
  std::error_code ec;
  fs::path resolved = fs::canonical(dir, ec);
  if (ec) return Status(StatusCode::kNotFound, what + " " + dir.string() + ": " + ec.message());
  if (!fs::is_directory(resolved, ec)) {
    return Status(StatusCode::kNotFound, what + " " + dir.string() + " is not a directory");
  }
  return resolved;
}

}  // namespace

Result<std::string> resolve_stats_dump_path(const std::string& configured_output,
                                            const std::string& requested) {
  if (configured_output.empty()) {
    return failed_precondition_error(
        "no statistics output is configured (placement.stats_output_path); dumps are disabled");
  }
  std::error_code ec;
  const fs::path configured = fs::absolute(fs::path(configured_output), ec);
  if (ec || !configured.has_filename()) {
    return failed_precondition_error("placement.stats_output_path '" + configured_output +
                                     "' does not name a file");
  }
  Result<fs::path> root = canonical_dir(configured.parent_path(), "statistics output directory");
  if (!root.ok()) return failed_precondition_error(root.status().message());
  if (requested.empty()) return (*root / configured.filename()).string();

  if (requested.find('\0') != std::string::npos) {
    return invalid_argument_error("path: contains a NUL byte");
  }
  if (requested.size() > kMaxPathBytes) {
    return invalid_argument_error("path: " + std::to_string(requested.size()) +
                                  " bytes, the limit is " + std::to_string(kMaxPathBytes));
  }
  fs::path candidate(requested);
  if (candidate.is_relative()) candidate = *root / candidate;
  candidate = candidate.lexically_normal();
  const fs::path name = candidate.filename();
  if (name.empty() || name == "." || name == "..") {
    return invalid_argument_error("path: '" + requested + "' does not name a file");
  }
  Result<fs::path> parent = canonical_dir(candidate.parent_path(), "path: directory");
  if (!parent.ok()) {
    // A directory outside the root is refused as such, existing or not.
    if (!is_within(*root, candidate.parent_path())) {
      return permission_denied_error("path: '" + requested + "' is outside the statistics " +
                                     "directory " + root->string());
    }
    return invalid_argument_error(parent.status().message());
  }
  if (!is_within(*root, *parent)) {
    return permission_denied_error("path: '" + requested +
                                   "' is outside the statistics directory " + root->string());
  }
  const fs::path target = *parent / name;
  if (fs::is_directory(fs::symlink_status(target, ec))) {
    return invalid_argument_error("path: '" + requested + "' is a directory");
  }
  return target.string();
}

}  // namespace tandem::server
