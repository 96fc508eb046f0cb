// Writing files where another local user may have planted names first: a file is replaced by
// renaming a freshly created sibling over it (never opened through an existing name, so a
// planted symlink is replaced, not followed), and a private directory is always a new one.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "base/result.h"
#include "base/status.h"

namespace tandem {

// Writes `bytes` to a new file beside `path` (a random name, O_EXCL | O_NOFOLLOW, mode 0644
// less the umask), flushes it and renames it over `path`. Readers see the old contents or the
// new ones, never a mix; whatever `path` was (file or symlink) is replaced, its target untouched.
// NOT_FOUND when the directory is missing, PERMISSION_DENIED when it refuses the file,
// INTERNAL for other failures; each message names the path and the system's reason.
Status replace_file(const std::string& path, std::string_view bytes);

// Creates a new directory `<parent>/<prefix>XXXXXX` (random suffix, mkdtemp) readable by
// others (0755) but writable by this user only, and returns its path. Never reuses a directory
// that already exists. Errors as replace_file.
Result<std::string> create_fresh_directory(const std::string& parent, const std::string& prefix);

// Owns a directory this process created (create_fresh_directory) and removes it with its
// contents when destroyed. Movable, not copyable; empty owns nothing.
class OwnedDirectory {
 public:
  OwnedDirectory() = default;
  explicit OwnedDirectory(std::string path) : path_(std::move(path)) {}
  OwnedDirectory(OwnedDirectory&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  OwnedDirectory& operator=(OwnedDirectory&& other) noexcept;
  OwnedDirectory(const OwnedDirectory&) = delete;
  OwnedDirectory& operator=(const OwnedDirectory&) = delete;
  ~OwnedDirectory() { remove(); }

  const std::string& path() const { return path_; }

 private:
  void remove();
  std::string path_;
};

}  // namespace tandem
