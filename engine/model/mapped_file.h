// MappedFile: a read-only memory mapping of a whole file; checkpoint weights are views into it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace tandem::model {

// Owns one read-only, private mapping and the open file behind it. Move-only; the bytes stay
// valid (at the same address) until destruction. The bytes are immutable after open, so any
// thread may read them concurrently, but they are only as stable as the file: a file truncated or
// rewritten in place changes them under the reader (a truncation would raise SIGBUS; the mapping
// is guarded, see mapping_fault_guard.h). check_unchanged tells; load_into_memory removes the
// dependence on the file.
class MappedFile {
 public:
  // Maps `path` read-only. NOT_FOUND when it does not exist, PERMISSION_DENIED when it cannot be
  // read, INVALID_ARGUMENT when it is not a regular file; messages name the path. An empty file
  // maps to an empty span.
  static Result<MappedFile> open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::string& path() const { return path_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }

  // The bytes [offset, offset + length) when they lie inside the file, else OUT_OF_RANGE with the
  // path, the range and the file size. Overflow-safe.
  Result<std::span<const uint8_t>> slice(uint64_t offset, uint64_t length) const;

  // OK while the bytes are still the file's as opened: the open file's size and modification
  // time are what they were (one fstat), and no read faulted past its end. DATA_LOSS naming the
  // path and what changed otherwise (a file replaced by rename is not a change: the mapping keeps
  // the old file). Always OK after load_into_memory. Any thread; cheap enough for every step.
  Status check_unchanged() const;

  // Copies the file into anonymous memory at the same address (so every view stays valid) and
  // closes it; from then on the bytes no longer depend on the file. DATA_LOSS when the file
  // changed while being read, INTERNAL when memory runs out. Blocking I/O (reads the whole file);
  // call before other threads read the bytes. Idempotent. Logically const: the bytes and their
  // address do not change.
  Status load_into_memory() const;
  bool in_memory() const { return fd_ < 0; }

  // After load_into_memory: the bytes release_copied_bytes was given inside these bytes (since the
  // last call), merged where they overlap or touch, leave resident memory for good where they
  // cover whole pages, which become unreadable (PROT_NONE), so that a read the caller did not
  // expect faults at once instead of seeing zeros. Returns the bytes dropped (each page once); 0
  // while the bytes are mapped from the file (release_copied_bytes dropped those pages already,
  // and a read maps them again). Call only once nothing reads those
  // bytes again: the engine calls it when its start-up (GPU upload and self-check included) is
  // done. Any thread; not concurrently with release_copied_bytes on the same bytes.
  uint64_t drop_released() const;

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size, int fd, int64_t mtime_ns);
  void reset();

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  mutable int fd_ = -1;   // the open file while the bytes are mapped from it; -1 once in memory
  int64_t mtime_ns_ = 0;  // the file's modification time at open
  mutable int guard_slot_ = -1;  // mapping_fault_guard slot while mapped from the file
};

// Bytes a checkpoint reader derives at open (ConvertedTensors), in an anonymous mapping of their
// own that release_copied_bytes knows, as it knows a file read into memory: what the CPU then
// repacks (or the GPU holds) from them is freed by drop_released once nothing reads it again,
// instead of staying beside its copy. Move-only; the bytes stay at their address until
// destruction. Empty when default-constructed.
class OwnedCopy {
 public:
  OwnedCopy() = default;
  // `size` zeroed bytes (std::bad_alloc when the system refuses the mapping).
  explicit OwnedCopy(size_t size);
  OwnedCopy(OwnedCopy&& other) noexcept;
  OwnedCopy& operator=(OwnedCopy&& other) noexcept;
  OwnedCopy(const OwnedCopy&) = delete;
  OwnedCopy& operator=(const OwnedCopy&) = delete;
  ~OwnedCopy();

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  // As MappedFile::drop_released for a file read into memory.
  uint64_t drop_released() const;

 private:
  void reset();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// For bytes the caller has copied and will not read again soon (weights repacked into their own
// buffer): their whole pages leave this process's resident memory where that loses nothing. Bytes
// still mapped from a MappedFile's file (not load_into_memory'd): the pages are unmapped from the
// process and stay in the page cache; a later read maps them again, from there or from the file,
// with the same bytes (madvise MADV_DONTNEED: on a private file mapping never written it drops
// only the mapping). Bytes of a file read into memory or of an OwnedCopy keep their contents
// until its drop_released (their pages are remembered for it; dropping them loses them, so it
// waits until nothing reads them). Any memory (a read copy meanwhile, a heap buffer) is also marked
// cold, so that reclaim takes it first. Partial pages at either end are left alone. Any thread;
// call only while no other thread frees the memory.
void release_copied_bytes(std::span<const uint8_t> bytes);

// release_copied_bytes on each run of the spans that overlap or touch, taken together: the page
// two neighbouring matrices (consecutive experts of one tensor) share goes too. Any order.
void release_copied_spans(std::vector<std::span<const uint8_t>> spans);

}  // namespace tandem::model
