// SafetensorsFile: header parsing and the validation rules listed in safetensors_file.h.
#include "engine/model/safetensors_file.h"

#include <algorithm>
#include <string>
#include <utility>

#include "engine/model/hf_config.h"

namespace tandem::model {

namespace {

constexpr std::string_view kMetadataKey = "__metadata__";

std::string in_quotes(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

// An entry of the header after its own checks, before the tiling check.
struct Entry {
  TensorInfo info;
  uint64_t begin = 0;
  uint64_t end = 0;
};

Status parse_metadata(const nlohmann::json& value, const std::string& where,
                      std::map<std::string, std::string>* out) {
  if (value.is_null()) return Status::ok_status();
  if (!value.is_object()) {
    return invalid_argument_error(where + ": " + std::string(kMetadataKey) + " is a " +
                                  value.type_name() + ", not an object");
  }
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) {
      return invalid_argument_error(where + ": " + std::string(kMetadataKey) + "[" +
                                    in_quotes(key) + "] is a " + v.type_name() + ", not a string");
    }
    out->emplace(key, v.get<std::string>());
  }
  return Status::ok_status();
}

Result<Entry> parse_entry(const std::string& name, const nlohmann::json& value,
                          const std::string& file) {
  const std::string where = file + ": tensor " + in_quotes(name);
  if (name.empty()) return invalid_argument_error(file + ": a tensor has an empty name");
  if (name.size() > kSafetensorsMaxNameBytes) {
    return invalid_argument_error(file + ": a tensor name is " + std::to_string(name.size()) +
                                  " bytes, more than the limit of " +
                                  std::to_string(kSafetensorsMaxNameBytes));
  }
  if (!value.is_object()) {
    return invalid_argument_error(where + ": entry is a " + std::string(value.type_name()) +
                                  ", not an object");
  }
  Entry entry;
  entry.info.name = name;
  entry.info.file = file;

  const auto dtype = value.find("dtype");
  if (dtype == value.end() || !dtype->is_string()) {
    return invalid_argument_error(where + ": \"dtype\" is missing or not a string");
  }
  Result<TensorType> type =
      tensor_type_from_safetensors_dtype(dtype->get_ref<const std::string&>());
  if (!type.ok()) return type.status().with_prefix(where);
  entry.info.type = *type;

  const auto shape = value.find("shape");
  if (shape == value.end() || !shape->is_array()) {
    return invalid_argument_error(where + ": \"shape\" is missing or not an array");
  }
  if (shape->size() > kSafetensorsMaxDims) {
    return invalid_argument_error(where + ": shape has " + std::to_string(shape->size()) +
                                  " dimensions, more than the limit of " +
                                  std::to_string(kSafetensorsMaxDims));
  }
  uint64_t elements = 1;
  for (size_t i = 0; i < shape->size(); ++i) {
    const nlohmann::json& dim = (*shape)[i];
    if (!dim.is_number_unsigned()) {
      return invalid_argument_error(where + ": shape[" + std::to_string(i) + "] is " + dim.dump() +
                                    ", not a non-negative integer");
    }
    const uint64_t d = dim.get<uint64_t>();
    if (__builtin_mul_overflow(elements, d, &elements)) {
      return invalid_argument_error(where + ": size overflow: the element count of shape " +
                                    shape->dump() + " overflows 64 bits");
    }
    entry.info.shape.push_back(d);
  }
  entry.info.n_elements = elements;
  Result<uint64_t> bytes = tensor_type_bytes(entry.info.type, elements);
  if (!bytes.ok()) return bytes.status().with_prefix(where + ": size overflow");

  const auto offsets = value.find("data_offsets");
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    return invalid_argument_error(
        where + ": \"data_offsets\" must be two non-negative integers [begin, end], got " +
        (offsets == value.end() ? std::string("nothing") : offsets->dump()));
  }
  entry.begin = (*offsets)[0].get<uint64_t>();
  entry.end = (*offsets)[1].get<uint64_t>();
  if (entry.end < entry.begin) {
    return invalid_argument_error(where + ": data_offsets end " + std::to_string(entry.end) +
                                  " is before begin " + std::to_string(entry.begin));
  }
  if (entry.end - entry.begin != *bytes) {
    return invalid_argument_error(where + ": data_offsets span " +
                                  std::to_string(entry.end - entry.begin) + " bytes but dtype " +
                                  dtype->get<std::string>() + " x shape " + shape->dump() +
                                  " needs " + std::to_string(*bytes));
  }
  return entry;
}

}  // namespace

Result<SafetensorsContents> parse_safetensors(std::span<const uint8_t> bytes,
                                              std::string_view file_name) {
  const std::string file(file_name);
  const uint64_t size = bytes.size();
  if (size < 8) {
    return invalid_argument_error(file + ": file is " + std::to_string(size) +
                                  " bytes, too short for the 8-byte header length");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[static_cast<size_t>(i)];
  if (n > kSafetensorsMaxHeaderBytes) {
    return resource_exhausted_error(file + ": header length " + std::to_string(n) +
                                    " (offset 0) exceeds the limit of " +
                                    std::to_string(kSafetensorsMaxHeaderBytes) + " bytes");
  }
  if (n > size - 8) {
    return out_of_range_error(file + ": header length " + std::to_string(n) +
                              " (offset 0) exceeds the " + std::to_string(size - 8) +
                              " bytes that follow it");
  }
  if (n < 2) {
    return invalid_argument_error(file + ": header length " + std::to_string(n) +
                                  " is too short for a JSON object");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8),
                              static_cast<size_t>(n));
  if (text.front() != '{') {
    return invalid_argument_error(file + ": header (offset 8) does not start with '{'");
  }
  Result<nlohmann::json> header =
      parse_json_strict(text, file + ": header", kSafetensorsMaxJsonDepth);
  if (!header.ok()) return header.status();
  if (!header->is_object()) {
    return invalid_argument_error(file + ": header is not a JSON object");
  }

  SafetensorsContents contents;
  contents.data_start = 8 + n;
  std::vector<Entry> entries;
  entries.reserve(header->size());
  for (const auto& [key, value] : header->items()) {
    if (key == kMetadataKey) {
      TANDEM_RETURN_IF_ERROR(parse_metadata(value, file, &contents.metadata));
      continue;
    }
    TANDEM_ASSIGN_OR_RETURN(Entry entry, parse_entry(key, value, file));
    entries.push_back(std::move(entry));
  }

  // The tensors must tile the data section exactly, as the safetensors library requires.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const uint64_t data_size = size - contents.data_start;
  uint64_t expected = 0;
  const std::string* previous = nullptr;
  for (Entry& e : entries) {
    const std::string where = file + ": tensor " + in_quotes(e.info.name);
    if (e.end > data_size) {
      return out_of_range_error(where + ": data_offsets [" + std::to_string(e.begin) + ", " +
                                std::to_string(e.end) + ") run past the end of the file (data " +
                                "section is " + std::to_string(data_size) + " bytes)");
    }
    if (e.begin < expected) {
      return invalid_argument_error(where + ": data_offsets [" + std::to_string(e.begin) + ", " +
                                    std::to_string(e.end) + ") overlap tensor " +
                                    in_quotes(previous != nullptr ? *previous : std::string()));
    }
    if (e.begin > expected) {
      return invalid_argument_error(where + ": " + std::to_string(e.begin - expected) +
                                    " unused bytes before it (data offset " +
                                    std::to_string(expected) + "); tensors must be contiguous");
    }
    expected = e.end;
    previous = &e.info.name;
    e.info.file_offset = contents.data_start + e.begin;
    e.info.data = bytes.subspan(static_cast<size_t>(e.info.file_offset),
                                static_cast<size_t>(e.end - e.begin));
  }
  if (expected != data_size) {
    return invalid_argument_error(file + ": " + std::to_string(data_size - expected) +
                                  " bytes after the last tensor (data offset " +
                                  std::to_string(expected) + ") are not covered by any tensor");
  }
  contents.tensors.reserve(entries.size());
  for (Entry& e : entries) contents.tensors.push_back(std::move(e.info));
  return contents;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  TANDEM_ASSIGN_OR_RETURN(SafetensorsContents contents, parse_safetensors(file.bytes(), path));
  return SafetensorsFile(std::move(file), std::move(contents));
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  for (const TensorInfo& t : contents_.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace tandem::model
