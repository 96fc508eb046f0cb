// MappedFile: open + fstat + mmap, with errors that name the path.
#include "engine/model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tandem::model {

namespace {
Status errno_status(int err, const std::string& what, const std::string& path) {
  std::string msg = path + ": " + what + ": " + std::strerror(err);
  if (err == ENOENT) return not_found_error(std::move(msg));
  if (err == EACCES || err == EPERM) return permission_denied_error(std::move(msg));
  return invalid_argument_error(std::move(msg));
}
}  // namespace

Result<MappedFile> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, "cannot open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return errno_status(err, "cannot stat", path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument_error(path + ": not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return MappedFile(path, nullptr, 0);
  }
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps its own reference to the file
  if (addr == MAP_FAILED) return errno_status(err, "cannot mmap", path);
  return MappedFile(path, static_cast<const uint8_t*>(addr), size);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    path_ = std::move(other.path_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() {
  reset();
}

void MappedFile::reset() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

Result<std::span<const uint8_t>> MappedFile::slice(uint64_t offset, uint64_t length) const {
  if (offset > size_ || length > size_ - offset) {
    return out_of_range_error(path_ + ": bytes [" + std::to_string(offset) + ", " +
                              std::to_string(offset) + "+" + std::to_string(length) +
                              ") lie outside the file (" + std::to_string(size_) + " bytes)");
  }
  return std::span<const uint8_t>(data_ + offset, static_cast<size_t>(length));
}

}  // namespace tandem::model
