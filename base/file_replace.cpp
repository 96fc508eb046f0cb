// Sibling-and-rename file replacement and fresh directories (POSIX).
#include "base/file_replace.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

namespace tandem {
namespace {

// The error for a failed system call on `path`, coded by errno.
Status system_error(const std::string& what, int err) {
  const std::string message = what + ": " + std::strerror(err);
  if (err == ENOENT || err == ENOTDIR) return not_found_error(message);
  if (err == EACCES || err == EPERM || err == EROFS) return permission_denied_error(message);
  return internal_error(message);
}

std::string random_suffix() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device device;
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string suffix(8, 'x');
  for (char& c : suffix) c = kAlphabet[pick(device)];
  return suffix;
}

// Writes all of `bytes` to `fd`, retrying short writes and EINTR; errno on failure.
bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

Status replace_file(const std::string& path, std::string_view bytes) {
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = path + ".tmp-" + random_suffix();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) return system_error(tmp + ": cannot be created", errno);
  }
  if (fd < 0) return system_error(tmp + ": cannot be created", EEXIST);
  if (!write_all(fd, bytes) || ::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return system_error(tmp + ": write failed", err);
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return system_error(tmp + ": write failed", err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return system_error(path + ": cannot be replaced", err);
  }
  return Status();
}

Result<std::string> create_fresh_directory(const std::string& parent, const std::string& prefix) {
  std::string pattern = parent + "/" + prefix + "XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) {
    return system_error(pattern + ": cannot be created", errno);
  }
  std::string dir(buffer.data());
  if (::chmod(dir.c_str(), 0755) != 0) {
    const int err = errno;
    ::rmdir(dir.c_str());
    return system_error(dir + ": cannot set its mode", err);
  }
  return dir;
}

OwnedDirectory& OwnedDirectory::operator=(OwnedDirectory&& other) noexcept {
  if (this != &other) {
    remove();
    path_ = std::exchange(other.path_, {});
  }
  return *this;
}

void OwnedDirectory::remove() {
  if (path_.empty()) return;
  std::error_code ignored;  // best effort at exit; nothing to report to
  std::filesystem::remove_all(path_, ignored);
  path_.clear();
}

}  // namespace tandem
