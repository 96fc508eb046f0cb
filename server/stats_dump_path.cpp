// Confinement of DumpActivationStats paths to the statistics output directory.
#include "server/stats_dump_path.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
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

Status check_stats_output_path(const std::string& configured_output) {
  if (configured_output.empty()) return Status();
  const std::string key = "placement.stats_output_path '" + configured_output + "'";
  if (configured_output.find('\0') != std::string::npos) {
    return invalid_argument_error(key + ": contains a NUL byte");
  }
  const Result<std::string> target = resolve_stats_dump_path(configured_output, "");
  if (!target.ok()) {
    return invalid_argument_error(key + ": " + target.status().message() +
                                  "; the activation statistics could not be written at shutdown");
  }
  std::error_code ec;
  if (fs::is_directory(fs::symlink_status(*target, ec))) {
    return invalid_argument_error(key + ": is a directory; name the file to write");
  }
  const std::string dir = fs::path(*target).parent_path().string();
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    return invalid_argument_error(key + ": cannot create files in the directory " + dir + ": " +
                                  std::strerror(err) +
                                  "; the activation statistics could not be written at shutdown");
  }
  return Status();
}

}  // namespace tandem::server
