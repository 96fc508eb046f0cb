// GgufFile: open/parse entry points, lookups and typed metadata getters.
#include "engine/model/gguf_file.h"

#include "engine/model/gguf_parser.h"

namespace tandem::model {

Result<GgufFile> GgufFile::open(const std::string& path, const GgufLimits& limits) {
  TANDEM_ASSIGN_OR_RETURN(MappedFile mapping, MappedFile::open(path));
  GgufFile file;
  file.name_ = path;
  file.bytes_ = mapping.bytes();  // the mapping's address does not change when it moves
  file.mapping_.emplace(std::move(mapping));
  TANDEM_RETURN_IF_ERROR(GgufParser::run(file, limits));
  return file;
}

Result<GgufFile> GgufFile::parse(std::span<const uint8_t> bytes, std::string name,
                                 const GgufLimits& limits) {
  GgufFile file;
  file.name_ = std::move(name);
  file.bytes_ = bytes;
  TANDEM_RETURN_IF_ERROR(GgufParser::run(file, limits));
  return file;
}

GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

const GgufKeyValue* GgufFile::find_entry(std::string_view key) const {
  const auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second];
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const GgufKeyValue* kv = find_entry(key);
  return kv == nullptr ? nullptr : &kv->value;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::vector<const MappedFile*> GgufFile::mappings() const {
  std::vector<const MappedFile*> out;
  if (mapping() != nullptr) out.push_back(mapping());
  for (const GgufFile& shard : shards_) {
    if (shard.mapping() != nullptr) out.push_back(shard.mapping());
  }
  return out;
}

Status GgufFile::adopt_shard(GgufFile shard) {
  for (const auto& [name, index] : shard.tensor_index_) {
    if (const auto it = tensor_index_.find(name); it != tensor_index_.end()) {
      return invalid_argument_error(shard.name_ + ": tensor '" + std::string(name) +
                                    "' is also in " + tensors_[it->second].file +
                                    ": the shards of a split model hold each tensor once");
    }
  }
  const size_t first = tensors_.size();
  tensors_.insert(tensors_.end(), shard.tensors_.begin(), shard.tensors_.end());
  for (const auto& [name, index] : shard.tensor_index_) tensor_index_.emplace(name, first + index);
  shards_.push_back(std::move(shard));  // the name views stay valid: they view its bytes
  return Status();
}

Status GgufFile::key_error(const GgufKeyValue& kv, const Status& status) const {
  return Status(status.code(), name_ + ": offset " + std::to_string(kv.offset) + ": key '" +
                                   std::string(kv.key) + "' " + status.message());
}

// Looks the key up and converts its value, adding file, key and offset to any error.
#define TANDEM_GGUF_GETTER(Type, method, conversion)                                \
  Result<Type> GgufFile::method(std::string_view key) const {                       \
    const GgufKeyValue* kv = find_entry(key);                                       \
    if (kv == nullptr) {                                                            \
      return not_found_error(name_ + ": key '" + std::string(key) + "' not found"); \
    }                                                                               \
    auto r = kv->value.conversion();                                                \
    if (!r.ok()) return key_error(*kv, r.status());                                 \
    return Type(std::move(r).value());                                              \
  }

TANDEM_GGUF_GETTER(uint32_t, get_u32, to_u32)
TANDEM_GGUF_GETTER(uint64_t, get_u64, to_u64)
TANDEM_GGUF_GETTER(int32_t, get_i32, to_i32)
TANDEM_GGUF_GETTER(int64_t, get_i64, to_i64)
TANDEM_GGUF_GETTER(float, get_f32, to_f32)
TANDEM_GGUF_GETTER(double, get_f64, to_f64)
TANDEM_GGUF_GETTER(bool, get_bool, to_bool)
TANDEM_GGUF_GETTER(std::string_view, get_string, to_string)
TANDEM_GGUF_GETTER(std::span<const std::string_view>, get_string_array, to_string_array)
TANDEM_GGUF_GETTER(std::vector<int64_t>, get_i64_array, to_i64_array)
TANDEM_GGUF_GETTER(std::vector<float>, get_f32_array, to_f32_array)

#undef TANDEM_GGUF_GETTER

Result<uint32_t> GgufFile::get_u32_or(std::string_view key, uint32_t fallback) const {
  if (!contains(key)) return fallback;
  return get_u32(key);
}

Result<float> GgufFile::get_f32_or(std::string_view key, float fallback) const {
  if (!contains(key)) return fallback;
  return get_f32(key);
}

Result<bool> GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  if (!contains(key)) return fallback;
  return get_bool(key);
}

Result<std::string_view> GgufFile::get_string_or(std::string_view key,
                                                 std::string_view fallback) const {
  if (!contains(key)) return fallback;
  return get_string(key);
}

}  // namespace tandem::model
