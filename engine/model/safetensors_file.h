// SafetensorsFile: one validated .safetensors file (header + tensor views into its mapping).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "engine/model/mapped_file.h"
#include "engine/model/tensor_info.h"

namespace tandem::model {

// Layout: 8-byte little-endian header length N, N bytes of UTF-8 JSON (optionally padded with
// trailing spaces), then the data section. The JSON maps tensor names to
// {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]} (offsets relative to the first
// data byte) plus an optional "__metadata__" object of string -> string.
//
// Validation (every rule fails with an error naming the file, the tensor or field and the fault;
// nothing aborts and nothing reads outside the bytes given):
// - N >= 2, N <= kSafetensorsMaxHeaderBytes, 8 + N <= file size; the header starts with '{'.
// - The JSON is valid UTF-8, nests at most kSafetensorsMaxJsonDepth deep and has no duplicate key
//   in any object (so no duplicate tensor name).
// - "__metadata__" is an object (or null) whose values are all strings.
// - Each tensor: a non-empty name of at most kSafetensorsMaxNameBytes bytes; a known dtype (the
//   error names an unknown one); a shape of at most kSafetensorsMaxDims non-negative integers
//   whose element count and byte size do not overflow; data_offsets exactly two non-negative
//   integers with begin <= end and end - begin == bytes of dtype x shape.
// - As the safetensors library does: the tensors, ordered by offset, tile the data section
//   exactly — the first begins at 0, each begins where the previous ends (no gap, no overlap) and
//   the last ends at the end of the file (no trailing bytes). A file with no tensors has an empty
//   data section.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;  // the library's limit
inline constexpr int kSafetensorsMaxJsonDepth = 64;
inline constexpr size_t kSafetensorsMaxNameBytes = 4096;
inline constexpr size_t kSafetensorsMaxDims = 16;

// What a safetensors byte image contains. Tensors are ordered by offset; their `data` spans point
// into the bytes that were parsed and `file` is the name given to the parser.
struct SafetensorsContents {
  std::vector<TensorInfo> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"; empty when absent
  uint64_t data_start = 0;                      // absolute offset of the data section (8 + N)
};

// Parses and validates a whole safetensors image held by the caller (a mapping, a test buffer, a
// fuzzer input). `file_name` is used in messages and TensorInfo::file. Errors: INVALID_ARGUMENT for
// malformed content, OUT_OF_RANGE for ranges past the end, RESOURCE_EXHAUSTED for a header over
// the cap. Pure function; any thread.
Result<SafetensorsContents> parse_safetensors(std::span<const uint8_t> bytes,
                                              std::string_view file_name);

// A mapped, validated safetensors file. Owns its mapping; every TensorInfo::data is a view into it
// and stays valid while this object (or whatever it is moved into) lives. Move-only; immutable
// after open, so any thread may read it concurrently.
class SafetensorsFile {
 public:
  // Maps `path` and validates it as above. Errors name the path.
  static Result<SafetensorsFile> open(const std::string& path);

  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return file_.path(); }
  uint64_t size() const { return file_.size(); }
  const MappedFile& mapping() const { return file_; }
  // Ordered by file offset.
  const std::vector<TensorInfo>& tensors() const { return contents_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return contents_.metadata; }
  uint64_t data_start() const { return contents_.data_start; }
  // The tensor called `name`, or nullptr. Linear in the tensor count.
  const TensorInfo* find(std::string_view name) const;

 private:
  SafetensorsFile(MappedFile file, SafetensorsContents contents)
      : file_(std::move(file)), contents_(std::move(contents)) {}

  MappedFile file_;
  SafetensorsContents contents_;
};

}  // namespace tandem::model
