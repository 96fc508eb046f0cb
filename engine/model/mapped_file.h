// MappedFile: a read-only memory mapping of a whole file; checkpoint weights are views into it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "engine/base/result.h"

namespace tandem::model {

// Owns one read-only, private mapping. Move-only; the bytes stay valid until destruction.
// Immutable after open, so any thread may read it concurrently.
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

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  void reset();

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tandem::model
