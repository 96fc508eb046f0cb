// MappedFile: open + fstat + mmap, with errors that name the path; the change check and the copy
// into memory; OwnedCopy; the registry of both that release_copied_bytes and drop_released share.
#include "engine/model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "engine/model/mapping_fault_guard.h"

namespace tandem::model {

namespace {

// The files read into memory (load_into_memory) and the OwnedCopy mappings, by their address
// range, with the byte ranges release_copied_bytes was given inside each since its last drop.
struct RegisteredCopy {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  std::vector<std::pair<uintptr_t, uintptr_t>> released;
};

std::mutex& registered_copies_mutex() {
  static std::mutex m;
  return m;
}

std::vector<RegisteredCopy>& registered_copies() {
  static std::vector<RegisteredCopy> copies;
  return copies;
}

// The copy holding [begin, end) whole, or null. Under registered_copies_mutex().
RegisteredCopy* registered_copy_holding(uintptr_t begin, uintptr_t end) {
  for (RegisteredCopy& c : registered_copies()) {
    if (begin >= c.begin && end <= c.end) return &c;
  }
  return nullptr;
}

void register_copy(const uint8_t* data, size_t size) {
  const auto begin = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> lock(registered_copies_mutex());
  registered_copies().push_back(RegisteredCopy{begin, begin + size, {}});
}

void unregister_copy(const uint8_t* data) {
  std::lock_guard<std::mutex> lock(registered_copies_mutex());
  std::erase_if(registered_copies(), [data](const RegisteredCopy& c) {
    return c.begin == reinterpret_cast<uintptr_t>(data);
  });
}

// The whole pages of the ranges remembered for the registered memory at `data` (size bytes),
// merged where they overlap or touch, freed and made unreadable (MappedFile::drop_released).
uint64_t drop_released_in(const uint8_t* data, size_t size) {
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
  {
    std::lock_guard<std::mutex> lock(registered_copies_mutex());
    const auto begin = reinterpret_cast<uintptr_t>(data);
    RegisteredCopy* copy = registered_copy_holding(begin, begin + size);
    if (copy == nullptr) return 0;
    ranges.swap(copy->released);
  }
  // Overlapping or adjacent ranges merged before their ends are rounded in to whole pages: the
  // page two neighbouring experts share goes too, and every page counts once.
  std::sort(ranges.begin(), ranges.end());
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  uint64_t dropped = 0;
  for (size_t i = 0; i < ranges.size();) {
    uintptr_t end = ranges[i].second;
    const uintptr_t begin = (ranges[i].first + page - 1) / page * page;
    for (++i; i < ranges.size() && ranges[i].first <= end; ++i) {
      end = std::max(end, ranges[i].second);
    }
    end = end / page * page;
    if (begin >= end) continue;
    void* first = reinterpret_cast<void*>(begin);
    ::madvise(first, end - begin, MADV_DONTNEED);
    ::mprotect(first, end - begin, PROT_NONE);
    dropped += end - begin;
  }
  return dropped;
}

Status errno_status(int err, const std::string& what, const std::string& path) {
  std::string msg = path + ": " + what + ": " + std::strerror(err);
  if (err == ENOENT) return not_found_error(std::move(msg));
  if (err == EACCES || err == EPERM) return permission_denied_error(std::move(msg));
  return invalid_argument_error(std::move(msg));
}

int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// What differs between the file as opened and `now`, or "" when nothing.
std::string describe_change(size_t size, int64_t opened_mtime, const struct stat& now) {
  if (static_cast<uint64_t>(now.st_size) != size) {
    return "its size went from " + std::to_string(size) + " to " + std::to_string(now.st_size) +
           " bytes";
  }
  if (mtime_ns(now) != opened_mtime)
    return "it was rewritten in place (its modification time moved)";
  return "";
}

constexpr const char* kAdvice =
    "; the weights being served are no longer the ones loaded, so this model is not served any "
    "more. Replace model files by rename (cp to a new name, then mv), or set model.load_mode: "
    "read; restart tandemd to load the file as it is now";
}  // namespace

MappedFile::MappedFile(std::string path, const uint8_t* data, size_t size, int fd, int64_t mtime)
    : path_(std::move(path)), data_(data), size_(size), fd_(fd), mtime_ns_(mtime) {
  guard_slot_ = guard_mapping(data_, size_);
}

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
  if (size == 0) return MappedFile(path, nullptr, 0, fd, mtime_ns(st));
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (addr == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    return errno_status(err, "cannot mmap", path);
  }
  return MappedFile(path, static_cast<const uint8_t*>(addr), size, fd, mtime_ns(st));
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(other.data_),
      size_(other.size_),
      fd_(other.fd_),
      mtime_ns_(other.mtime_ns_),
      guard_slot_(other.guard_slot_) {
  other.data_ = nullptr;
  other.size_ = 0;
  other.fd_ = -1;
  other.guard_slot_ = -1;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    path_ = std::move(other.path_);
    data_ = other.data_;
    size_ = other.size_;
    fd_ = other.fd_;
    mtime_ns_ = other.mtime_ns_;
    guard_slot_ = other.guard_slot_;
    other.data_ = nullptr;
    other.size_ = 0;
    other.fd_ = -1;
    other.guard_slot_ = -1;
  }
  return *this;
}

MappedFile::~MappedFile() {
  reset();
}

void MappedFile::reset() {
  unguard_mapping(guard_slot_);
  guard_slot_ = -1;
  if (data_ != nullptr && fd_ < 0) unregister_copy(data_);
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
}

Result<std::span<const uint8_t>> MappedFile::slice(uint64_t offset, uint64_t length) const {
  if (offset > size_ || length > size_ - offset) {
    return out_of_range_error(path_ + ": bytes [" + std::to_string(offset) + ", " +
                              std::to_string(offset) + "+" + std::to_string(length) +
                              ") lie outside the file (" + std::to_string(size_) + " bytes)");
  }
  return std::span<const uint8_t>(data_ + offset, static_cast<size_t>(length));
}

Status MappedFile::check_unchanged() const {
  if (fd_ < 0) return Status();
  if (mapping_faulted(guard_slot_)) {
    return data_loss_error(path_ +
                           " changed on disk while being served: a read went past its "
                           "end (the file was truncated)" +
                           std::string(kAdvice));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    return data_loss_error(path_ + ": cannot stat the served file: " + std::strerror(errno));
  }
  const std::string change = describe_change(size_, mtime_ns_, st);
  if (change.empty()) return Status();
  return data_loss_error(path_ + " changed on disk while being served: " + change + kAdvice);
}

Status MappedFile::load_into_memory() const {
  if (fd_ < 0) return Status();
  if (size_ > 0) {
    void* copy = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED) {
      return internal_error(path_ + ": cannot allocate " + std::to_string(size_) +
                            " bytes to read it into memory: " + std::strerror(errno));
    }
    // Large pages where the kernel has them: fewer TLB misses over weights read at every step.
    ::madvise(copy, size_, MADV_HUGEPAGE);
    auto* out = static_cast<uint8_t*>(copy);
    size_t done = 0;
    while (done < size_) {
      const ssize_t n = ::pread(fd_, out + done, size_ - done, static_cast<off_t>(done));
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        const std::string why = n == 0 ? "the file ended early" : std::strerror(errno);
        ::munmap(copy, size_);
        return data_loss_error(path_ + ": reading it into memory failed at byte " +
                               std::to_string(done) + ": " + why);
      }
      done += static_cast<size_t>(n);
    }
    const Status unchanged = check_unchanged();
    if (!unchanged.ok()) {
      ::munmap(copy, size_);
      return unchanged;
    }
    ::mprotect(copy, size_, PROT_READ);
    // Moves the copy over the file mapping: same address, the file's pages unmapped at once.
    void* moved =
        ::mremap(copy, size_, size_, MREMAP_MAYMOVE | MREMAP_FIXED, const_cast<uint8_t*>(data_));
    if (moved == MAP_FAILED) {
      const int err = errno;
      ::munmap(copy, size_);
      return internal_error(path_ + ": cannot move the copy into place: " + std::strerror(err));
    }
  }
  ::close(fd_);
  fd_ = -1;
  unguard_mapping(guard_slot_);
  guard_slot_ = -1;
  if (size_ > 0) register_copy(data_, size_);
  return Status();
}

uint64_t MappedFile::drop_released() const {
  if (fd_ >= 0 || size_ == 0) return 0;
  return drop_released_in(data_, size_);
}

OwnedCopy::OwnedCopy(size_t size) {
  if (size == 0) return;
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  data_ = static_cast<uint8_t*>(p);
  size_ = size;
  register_copy(data_, size_);
}

OwnedCopy::OwnedCopy(OwnedCopy&& other) noexcept : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

OwnedCopy& OwnedCopy::operator=(OwnedCopy&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

OwnedCopy::~OwnedCopy() {
  reset();
}

void OwnedCopy::reset() {
  if (data_ == nullptr) return;
  unregister_copy(data_);
  ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

uint64_t OwnedCopy::drop_released() const {
  return data_ == nullptr ? 0 : drop_released_in(data_, size_);
}

void release_copied_bytes(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return;
  const auto lo = reinterpret_cast<uintptr_t>(bytes.data());
  const uintptr_t hi = lo + bytes.size();
  {
    std::lock_guard<std::mutex> lock(registered_copies_mutex());
    if (RegisteredCopy* copy = registered_copy_holding(lo, hi)) copy->released.emplace_back(lo, hi);
  }
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (lo + page - 1) / page * page;
  const uintptr_t end = hi / page * page;
  if (begin >= end) return;
  void* first = reinterpret_cast<void*>(begin);
  if (in_guarded_mapping(bytes.data(), bytes.size())) {
    ::madvise(first, end - begin, MADV_DONTNEED);
    return;
  }
#ifdef MADV_COLD
  ::madvise(first, end - begin, MADV_COLD);
#endif
}

void release_copied_spans(std::vector<std::span<const uint8_t>> spans) {
  std::sort(spans.begin(), spans.end(),
            [](const auto& a, const auto& b) { return std::less<>()(a.data(), b.data()); });
  for (size_t i = 0; i < spans.size();) {
    const uint8_t* begin = spans[i].data();
    const uint8_t* end = begin + spans[i].size();
    for (++i; i < spans.size() && spans[i].data() <= end; ++i) {
      end = std::max(end, spans[i].data() + spans[i].size());
    }
    release_copied_bytes({begin, static_cast<size_t>(end - begin)});
  }
}

}  // namespace tandem::model
