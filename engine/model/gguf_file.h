// GgufFile: a validated, read-only view of a GGUF v2/v3 checkpoint (metadata + tensor infos); for
// a split model (gguf_split.h), of its first shard with the later shards' tensors adopted.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "engine/model/mapped_file.h"
#include "engine/model/tensor_info.h"

namespace tandem::model {

// GGUF metadata value types; the values are the type ids written in the file (0..12).
enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "UINT32", "STRING", ... as the GGUF spec spells them; "UNKNOWN" outside the enum.
std::string_view gguf_type_name(GgufType type);

// Limits applied while parsing; the defaults suit every real model. Anything beyond them is
// rejected with INVALID_ARGUMENT naming the limit.
struct GgufLimits {
  // Nesting of ARRAY inside ARRAY: 1 = arrays of scalars/strings only. GGUF writers never nest,
  // so a small bound costs nothing and keeps recursion shallow.
  uint32_t max_array_depth = 4;
  // Elements of all ARRAY-of-ARRAY values together (each costs ~100 bytes of memory but only 12
  // in the file); bounds the memory a file of nested empty arrays can claim.
  uint64_t max_nested_array_elements = uint64_t{1} << 16;
  // Tensor names: the GGUF spec (GGML_MAX_NAME) allows 63 bytes; we accept up to 256 so that
  // long custom names still load, and reject longer ones.
  uint32_t max_tensor_name_bytes = 256;
  // Metadata keys: the spec bounds them by 2^16 - 1 bytes.
  uint32_t max_key_bytes = 65535;
};

class GgufValue;

// The payload of an ARRAY value. Strings are views into the file's bytes; fixed-size elements
// stay packed in the file (little-endian) and are decoded on access.
struct GgufArray {
  GgufType element_type = GgufType::kUint8;
  uint64_t size = 0;
  std::span<const uint8_t> raw;           // fixed-size element types: size * element bytes
  std::vector<std::string_view> strings;  // element_type == kString
  std::vector<GgufValue> arrays;          // element_type == kArray (nested arrays)
};

// One metadata value. Cheap to copy (an array is shared, not copied). Strings and array payloads
// are views into the bytes of the GgufFile that produced the value: valid while that GgufFile
// (or, for GgufFile::parse, the caller's span) lives. Immutable; any thread may read it.
//
// Accessor errors (no key context; GgufFile's getters add file and key):
//   INVALID_ARGUMENT: the value has another type; OUT_OF_RANGE: it does not fit the target type.
class GgufValue {
 public:
  GgufValue() = default;
  static GgufValue from_u64(GgufType type, uint64_t bits);  // integer / bool / float bit pattern
  static GgufValue from_string(std::string_view s);
  static GgufValue from_array(std::shared_ptr<const GgufArray> array);

  GgufType type() const { return type_; }
  bool is_integer() const;  // UINT8..INT64 (not BOOL)
  bool is_float() const;    // FLOAT32 or FLOAT64
  bool is_string() const { return type_ == GgufType::kString; }
  bool is_array() const { return type_ == GgufType::kArray; }

  // Any integer type whose value lies in the target range.
  Result<uint64_t> to_u64() const;
  Result<int64_t> to_i64() const;
  Result<uint32_t> to_u32() const;
  Result<int32_t> to_i32() const;
  // FLOAT32 or FLOAT64 (FLOAT64 is narrowed for to_f32; finite values out of float range fail).
  Result<double> to_f64() const;
  Result<float> to_f32() const;
  Result<bool> to_bool() const;
  Result<std::string_view> to_string() const;

  // Arrays. array() is null for non-arrays.
  const GgufArray* array() const { return array_.get(); }
  GgufType array_type() const;  // element type; meaningful only when is_array()
  uint64_t array_size() const;  // 0 for non-arrays
  // Element i as a standalone value; i must be < array_size() (a bug otherwise).
  GgufValue element(uint64_t i) const;
  // Typed whole-array views/copies; INVALID_ARGUMENT when not an array of a matching type.
  Result<std::span<const std::string_view>> to_string_array() const;
  Result<std::vector<int64_t>> to_i64_array() const;  // any integer element type (u64 must fit)
  Result<std::vector<float>> to_f32_array() const;    // FLOAT32 or FLOAT64 elements
  Result<std::vector<bool>> to_bool_array() const;

  // Short human-readable rendering ("UINT32 28", "STRING \"qwen3moe\"", "ARRAY[STRING x 151936]
  // [\"!\", ...]"), at most `max_elements` array elements shown. For logs and `inspect`.
  std::string debug_string(size_t max_elements = 4) const;

 private:
  GgufType type_ = GgufType::kUint8;
  uint64_t bits_ = 0;  // scalars: zero-extended raw little-endian bits
  std::string_view string_;
  std::shared_ptr<const GgufArray> array_;
};

// A metadata entry in file order. `key` views the file's bytes; `offset` is where the key's
// length field starts in the file (for error messages).
struct GgufKeyValue {
  std::string_view key;
  GgufValue value;
  uint64_t offset = 0;
};

// A parsed and validated GGUF file. Move-only.
//
// Ownership: open() owns the MappedFile; parse() does NOT own `bytes` — the caller keeps them
// alive and unchanged for as long as the GgufFile and anything taken from it (keys, string
// values, tensor data spans) are used. All views stay valid when the GgufFile is moved.
// Large arrays (a 150k-token vocabulary, merges) are stored as string_views into the bytes, not
// copied; no allocation is sized from a count before that count has been checked against the
// bytes left, and parse-time memory stays within a small multiple of the file size (about 2x for
// string arrays; ARRAY-of-ARRAY elements are further capped by GgufLimits).
//
// Validation on parse (each failure names the file, the key or tensor, and the byte offset):
// magic "GGUF"; version 2 or 3 (v1, big-endian files and newer versions: UNIMPLEMENTED); every
// count and length checked against the remaining bytes before anything is reserved; value type
// ids 0..12; nested arrays up to GgufLimits::max_array_depth; keys and tensor names non-empty,
// valid UTF-8, unique, within the length limits; `general.alignment` (if present) UINT32, non-zero,
// power of two; tensors: 1..4 dims, every dim in [1, 2^63), element count and byte size without
// overflow (whole quantization blocks), known ggml type id, offset a multiple of the alignment,
// data inside the file, no two tensors overlapping. Metadata string VALUES are not checked for
// UTF-8 (tokenizer vocabularies may hold raw bytes; the tokenizer validates them).
// Malformed input: INVALID_ARGUMENT; unsupported but well-formed (version): UNIMPLEMENTED.
//
// Immutable after parse; any thread may call the const methods concurrently.
class GgufFile {
 public:
  static constexpr uint64_t kDefaultAlignment = 32;

  // Maps `path` and parses it; errors from mapping (NOT_FOUND, ...) are passed through.
  static Result<GgufFile> open(const std::string& path, const GgufLimits& limits = {});
  // Parses bytes the caller owns (see lifetime above). `name` prefixes every error message and
  // becomes TensorInfo::file.
  static Result<GgufFile> parse(std::span<const uint8_t> bytes, std::string name,
                                const GgufLimits& limits = {});

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;
  ~GgufFile();

  const std::string& name() const { return name_; }  // the path for open()
  // The file's mapping for open(); null for parse().
  const MappedFile* mapping() const { return mapping_.has_value() ? &*mapping_ : nullptr; }
  std::span<const uint8_t> bytes() const { return bytes_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // Absolute offset of the tensor data section (end of tensor infos, aligned up). For a file
  // without tensors it may equal or exceed the file size.
  uint64_t data_offset() const { return data_offset_; }

  // Metadata in file order.
  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;  // null when absent
  bool contains(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters. NOT_FOUND when the key is absent; INVALID_ARGUMENT for the wrong type;
  // OUT_OF_RANGE when the value does not fit. Messages name the file, the key and its offset.
  // Integer getters accept any integer type in range; float getters accept FLOAT32/FLOAT64.
  Result<uint32_t> get_u32(std::string_view key) const;
  Result<uint64_t> get_u64(std::string_view key) const;
  Result<int32_t> get_i32(std::string_view key) const;
  Result<int64_t> get_i64(std::string_view key) const;
  Result<float> get_f32(std::string_view key) const;
  Result<double> get_f64(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string_view> get_string(std::string_view key) const;
  Result<std::span<const std::string_view>> get_string_array(std::string_view key) const;
  Result<std::vector<int64_t>> get_i64_array(std::string_view key) const;
  Result<std::vector<float>> get_f32_array(std::string_view key) const;
  // Optional keys: `fallback` when absent; still an error when present with a bad type/value.
  Result<uint32_t> get_u32_or(std::string_view key, uint32_t fallback) const;
  Result<float> get_f32_or(std::string_view key, float fallback) const;
  Result<bool> get_bool_or(std::string_view key, bool fallback) const;
  Result<std::string_view> get_string_or(std::string_view key, std::string_view fallback) const;

  // Tensors in file order; `data` spans view the bytes (see lifetime above). For a model split
  // over several files (open_gguf_model, gguf_split.h): this file's, then each later shard's.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;  // null when absent

  // The later shards of a split model, in order (empty for a whole file); this file, the first
  // shard, holds the model's metadata. Their tensors are part of tensors() and find_tensor().
  const std::vector<GgufFile>& shards() const { return shards_; }
  // The mappings of this file and its shards, in order (empty for parse()).
  std::vector<const MappedFile*> mappings() const;

 private:
  GgufFile() = default;
  friend class GgufParser;
  friend Result<GgufFile> open_gguf_model(const std::string& path, const GgufLimits& limits);
  // Appends `shard`'s tensors after the ones held so far; INVALID_ARGUMENT naming both files when
  // one of its tensor names is already taken.
  Status adopt_shard(GgufFile shard);
  const GgufKeyValue* find_entry(std::string_view key) const;
  Status key_error(const GgufKeyValue& kv, const Status& status) const;

  std::optional<MappedFile> mapping_;  // set by open()
  std::string name_;
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::unordered_map<std::string_view, size_t> key_index_;
  std::vector<TensorInfo> tensors_;
  // Keys view the names in the bytes of the file (or shard) that holds each tensor.
  std::unordered_map<std::string_view, size_t> tensor_index_;
  std::vector<GgufFile> shards_;
};

}  // namespace tandem::model
