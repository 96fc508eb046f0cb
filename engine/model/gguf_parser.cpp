// GgufParser: bounds-checked decoding and validation of a GGUF header, metadata and tensor infos.
#include "engine/model/gguf_parser.h"

#include <algorithm>
#include <bit>
#include <string_view>
#include <unordered_set>

#include "engine/model/gguf_wire.h"

namespace tandem::model {

namespace {

constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
constexpr uint64_t kMaxDim = static_cast<uint64_t>(INT64_MAX);
// Smallest possible encodings, used to bound counts by the bytes left before reserving anything.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;                  // key len, 1-byte key, type, u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;  // name, n_dims, 1 dim, type, off
constexpr uint64_t kMinArrayBytes = 4 + 8;                       // element type + count
constexpr uint64_t kMinStringBytes = 8;                          // length (empty string)

std::string quoted(std::string_view s) {
  // Names in messages: printable ASCII kept, anything else escaped, long names cut.
  constexpr size_t kMaxShown = 80;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'') {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > kMaxShown) out += "...";
  return out + "'";
}

// A read position over the file's bytes; every read checks the remaining length first.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }
  uint64_t size() const { return bytes_.size(); }

  // "name: offset N: what" as INVALID_ARGUMENT.
  Status error_at(uint64_t offset, const std::string& what) const {
    return invalid_argument_error(name_ + ": offset " + std::to_string(offset) + ": " + what);
  }

  Result<uint64_t> read_uint(size_t width, const std::string& field) {
    if (remaining() < width) {
      return error_at(pos_, field + ": file truncated (needs " + std::to_string(width) +
                                " bytes, " + std::to_string(remaining()) + " left of " +
                                std::to_string(size()) + ")");
    }
    const uint64_t v = read_le(bytes_.data() + pos_, width);
    pos_ += width;
    return v;
  }
  Result<uint32_t> read_u32(const std::string& field) {
    TANDEM_ASSIGN_OR_RETURN(const uint64_t v, read_uint(4, field));
    return static_cast<uint32_t>(v);
  }
  Result<uint64_t> read_u64(const std::string& field) { return read_uint(8, field); }

  // A count that needs at least `min_each` bytes per item in what is left of the file.
  Result<uint64_t> read_count(const std::string& field, uint64_t min_each) {
    const uint64_t at = pos_;
    TANDEM_ASSIGN_OR_RETURN(const uint64_t n, read_u64(field));
    if (min_each > 0 && n > remaining() / min_each) {
      return error_at(at, field + " " + std::to_string(n) + " exceeds what the file (" +
                              std::to_string(size()) + " bytes) can hold");
    }
    return n;
  }

  // A length-prefixed string (u64 length) of at most `max_len` bytes, as a view.
  Result<std::string_view> read_string(const std::string& field, uint64_t max_len) {
    const uint64_t at = pos_;
    TANDEM_ASSIGN_OR_RETURN(const uint64_t len, read_u64(field + " length"));
    if (len > remaining()) {
      return error_at(at, field + " length " + std::to_string(len) + " exceeds what the file (" +
                              std::to_string(size()) + " bytes) can hold");
    }
    if (len > max_len) {
      return error_at(at, field + " length " + std::to_string(len) + " exceeds the limit of " +
                              std::to_string(max_len) + " bytes");
    }
    std::string_view s(reinterpret_cast<const char*>(bytes_.data() + pos_),
                       static_cast<size_t>(len));
    pos_ += len;
    return s;
  }

  // A length-prefixed string when it fits; false (nothing consumed) otherwise.
  bool try_read_string(std::string_view& out) {
    if (remaining() < 8) return false;
    const uint64_t len = read_le(bytes_.data() + pos_, 8);
    if (len > remaining() - 8) return false;
    out = std::string_view(reinterpret_cast<const char*>(bytes_.data() + pos_ + 8),
                           static_cast<size_t>(len));
    pos_ += 8 + len;
    return true;
  }

  std::span<const uint8_t> take(uint64_t n) {  // caller checked n <= remaining()
    std::span<const uint8_t> s = bytes_.subspan(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& name_;
  uint64_t pos_ = 0;
};

// Per tensor, what the data-section pass needs: byte size and where its offset field was read.
struct Pending {
  uint64_t bytes;
  uint64_t offset_field_at;
};

bool is_known_value_type(uint32_t id) {
  return id <= static_cast<uint32_t>(GgufType::kFloat64);
}

}  // namespace

class GgufParser::Impl {
 public:
  Impl(GgufFile& file, const GgufLimits& limits, Cursor& cur)
      : file_(file), limits_(limits), cur_(cur) {}

  Status header(uint64_t& n_tensors, uint64_t& n_kv);
  Status metadata(uint64_t n_kv);
  Status tensor_infos(uint64_t n_tensors, std::vector<Pending>& pending);

 private:
  Result<GgufValue> value(GgufType type, const std::string& field, uint32_t depth);
  Result<GgufValue> array(const std::string& field, uint32_t depth);
  Result<std::string_view> name(const std::string& field, uint64_t max_len);

  GgufFile& file_;
  const GgufLimits& limits_;
  Cursor& cur_;
  uint64_t nested_elements_ = 0;  // elements of ARRAY-of-ARRAY values so far, all keys
};

Result<std::string_view> GgufParser::Impl::name(const std::string& field, uint64_t max_len) {
  const uint64_t at = cur_.pos();
  TANDEM_ASSIGN_OR_RETURN(const std::string_view s, cur_.read_string(field, max_len));
  if (s.empty()) return cur_.error_at(at, field + " is empty");
  if (!is_valid_utf8(s)) return cur_.error_at(at, field + " " + quoted(s) + " is not valid UTF-8");
  return s;
}

Result<GgufValue> GgufParser::Impl::value(GgufType type, const std::string& field, uint32_t depth) {
  const uint64_t at = cur_.pos();
  if (type == GgufType::kString) {
    TANDEM_ASSIGN_OR_RETURN(const std::string_view s, cur_.read_string(field, UINT64_MAX));
    return GgufValue::from_string(s);
  }
  if (type == GgufType::kArray) return array(field, depth + 1);
  const size_t width = gguf_scalar_size(type);
  TANDEM_ASSIGN_OR_RETURN(const uint64_t bits, cur_.read_uint(width, field));
  if (type == GgufType::kBool && bits > 1) {
    return cur_.error_at(at, field + ": BOOL value " + std::to_string(bits) + " is not 0 or 1");
  }
  return GgufValue::from_u64(type, bits);
}

Result<GgufValue> GgufParser::Impl::array(const std::string& field, uint32_t depth) {
  const uint64_t at = cur_.pos();
  if (depth > limits_.max_array_depth) {
    return cur_.error_at(at, field + ": arrays nested deeper than " +
                                 std::to_string(limits_.max_array_depth) + " levels");
  }
  TANDEM_ASSIGN_OR_RETURN(const uint32_t type_id, cur_.read_u32(field + " element type"));
  if (!is_known_value_type(type_id)) {
    return cur_.error_at(at, field + ": unknown array element type " + std::to_string(type_id));
  }
  auto arr = std::make_shared<GgufArray>();
  arr->element_type = static_cast<GgufType>(type_id);
  const size_t width = gguf_scalar_size(arr->element_type);
  const uint64_t min_each = arr->element_type == GgufType::kString  ? kMinStringBytes
                            : arr->element_type == GgufType::kArray ? kMinArrayBytes
                                                                    : width;
  TANDEM_ASSIGN_OR_RETURN(arr->size, cur_.read_count(field + " array count", min_each));
  if (width > 0) {
    arr->raw = cur_.take(arr->size * width);  // read_count bounded size * width by remaining
    if (arr->element_type == GgufType::kBool) {
      for (uint64_t i = 0; i < arr->size; ++i) {
        if (arr->raw[i] > 1) {
          return cur_.error_at(at, field + "[" + std::to_string(i) + "]: BOOL value " +
                                       std::to_string(arr->raw[i]) + " is not 0 or 1");
        }
      }
    }
  } else if (arr->element_type == GgufType::kString) {
    arr->strings.reserve(arr->size);
    for (uint64_t i = 0; i < arr->size; ++i) {
      std::string_view s;
      if (!cur_.try_read_string(s)) {  // the slow path only builds the message
        TANDEM_ASSIGN_OR_RETURN(
            s, cur_.read_string(field + "[" + std::to_string(i) + "]", UINT64_MAX));
      }
      arr->strings.push_back(s);
    }
  } else {
    if (arr->size > limits_.max_nested_array_elements - nested_elements_) {
      return cur_.error_at(at, field + ": more than " +
                                   std::to_string(limits_.max_nested_array_elements) +
                                   " nested array elements in the file");
    }
    nested_elements_ += arr->size;
    arr->arrays.reserve(arr->size);
    for (uint64_t i = 0; i < arr->size; ++i) {
      TANDEM_ASSIGN_OR_RETURN(GgufValue v, array(field + "[" + std::to_string(i) + "]", depth + 1));
      arr->arrays.push_back(std::move(v));
    }
  }
  return GgufValue::from_array(std::move(arr));
}

Status GgufParser::Impl::header(uint64_t& n_tensors, uint64_t& n_kv) {
  if (cur_.size() == 0) return cur_.error_at(0, "magic: file is empty");
  if (cur_.size() < 4) {
    return cur_.error_at(0, "magic: file truncated (" + std::to_string(cur_.size()) +
                                " bytes, a GGUF header needs 24)");
  }
  const std::span<const uint8_t> magic = cur_.take(4);
  if (std::string_view(reinterpret_cast<const char*>(magic.data()), 4) != "GGUF") {
    return cur_.error_at(
        0, "magic: not a GGUF file (magic bytes " +
               quoted(std::string_view(reinterpret_cast<const char*>(magic.data()), 4)) +
               ", expected 'GGUF')");
  }
  TANDEM_ASSIGN_OR_RETURN(const uint32_t version, cur_.read_u32("version"));
  if (version == 1) {
    return unimplemented_error(file_.name_ +
                               ": offset 4: version: GGUF v1 is not supported (only v2 and v3); "
                               "re-convert the model with a current llama.cpp");
  }
  if (version != 2 && version != 3) {
    const uint32_t swapped = __builtin_bswap32(version);
    if (swapped >= 1 && swapped <= 3) {
      return unimplemented_error(file_.name_ + ": offset 4: version: big-endian GGUF (version " +
                                 std::to_string(swapped) +
                                 " in big-endian byte order) is not supported; use a "
                                 "little-endian file");
    }
    return unimplemented_error(file_.name_ + ": offset 4: version: GGUF version " +
                               std::to_string(version) + " is not supported (only v2 and v3)");
  }
  file_.version_ = version;
  TANDEM_ASSIGN_OR_RETURN(n_tensors, cur_.read_u64("n_tensors"));
  TANDEM_ASSIGN_OR_RETURN(n_kv, cur_.read_u64("n_kv"));
  // Both tables follow; bound each count by the bytes left after the header.
  if (n_tensors > cur_.remaining() / kMinTensorInfoBytes) {
    return cur_.error_at(8, "n_tensors " + std::to_string(n_tensors) + " exceeds what the file (" +
                                std::to_string(cur_.size()) + " bytes) can hold");
  }
  if (n_kv > cur_.remaining() / kMinKvBytes) {
    return cur_.error_at(16, "n_kv " + std::to_string(n_kv) + " exceeds what the file (" +
                                 std::to_string(cur_.size()) + " bytes) can hold");
  }
  return {};
}

Status GgufParser::Impl::metadata(uint64_t n_kv) {
  file_.metadata_.reserve(n_kv);
  file_.key_index_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    const uint64_t at = cur_.pos();
    const std::string kv_field = "metadata key #" + std::to_string(i);
    TANDEM_ASSIGN_OR_RETURN(const std::string_view key, name(kv_field, limits_.max_key_bytes));
    const std::string field = "key " + quoted(key);
    if (file_.key_index_.count(key) != 0) {
      return cur_.error_at(at, field + " appears twice (first at offset " +
                                   std::to_string(file_.metadata_[file_.key_index_[key]].offset) +
                                   ")");
    }
    const uint64_t type_at = cur_.pos();
    TANDEM_ASSIGN_OR_RETURN(const uint32_t type_id, cur_.read_u32(field + " value type"));
    if (!is_known_value_type(type_id)) {
      return cur_.error_at(type_at, field + ": unknown value type " + std::to_string(type_id));
    }
    const GgufType type = static_cast<GgufType>(type_id);
    TANDEM_ASSIGN_OR_RETURN(GgufValue v, value(type, field, 0));
    if (key == "general.alignment") {
      if (type != GgufType::kUint32) {
        return cur_.error_at(type_at, field + " has type " + std::string(gguf_type_name(type)) +
                                          ", expected UINT32");
      }
      const uint64_t alignment = *v.to_u64();
      if (alignment == 0 || !std::has_single_bit(alignment)) {
        return cur_.error_at(
            type_at, field + ": alignment " + std::to_string(alignment) + " is not a power of two");
      }
      file_.alignment_ = alignment;
    }
    file_.key_index_.emplace(key, file_.metadata_.size());
    file_.metadata_.push_back(GgufKeyValue{key, std::move(v), at});
  }
  return {};
}

Status GgufParser::Impl::tensor_infos(uint64_t n_tensors, std::vector<Pending>& pending) {
  // Recheck against what is left now that the metadata has been read.
  if (n_tensors > cur_.remaining() / kMinTensorInfoBytes) {
    return cur_.error_at(8, "n_tensors " + std::to_string(n_tensors) + " exceeds what the file (" +
                                std::to_string(cur_.size()) + " bytes) can hold");
  }
  file_.tensors_.reserve(n_tensors);
  file_.tensor_index_.reserve(n_tensors);
  pending.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const uint64_t at = cur_.pos();
    TANDEM_ASSIGN_OR_RETURN(
        const std::string_view tname,
        name("tensor #" + std::to_string(i) + " name", limits_.max_tensor_name_bytes));
    const std::string field = "tensor " + quoted(tname);
    if (file_.tensor_index_.count(tname) != 0) {
      return cur_.error_at(at, field + " appears twice (first as tensor #" +
                                   std::to_string(file_.tensor_index_[tname]) + ")");
    }
    const uint64_t dims_at = cur_.pos();
    TANDEM_ASSIGN_OR_RETURN(const uint32_t n_dims, cur_.read_u32(field + " n_dims"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return cur_.error_at(dims_at, field + ": n_dims " + std::to_string(n_dims) +
                                        " is outside 1.." + std::to_string(kMaxDims));
    }
    TensorInfo info;
    info.name = std::string(tname);
    info.file = file_.name_;
    std::vector<uint64_t> ne(n_dims);
    uint64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim_at = cur_.pos();
      const std::string dim_field = field + " ne[" + std::to_string(d) + "]";
      TANDEM_ASSIGN_OR_RETURN(ne[d], cur_.read_u64(dim_field));
      if (ne[d] == 0 || ne[d] > kMaxDim) {
        return cur_.error_at(dim_at, dim_field + " " + std::to_string(ne[d]) + " is outside 1.." +
                                         std::to_string(kMaxDim));
      }
      if (__builtin_mul_overflow(n_elements, ne[d], &n_elements) || n_elements > kMaxDim) {
        return cur_.error_at(
            dim_at, field + ": size overflow (element count exceeds 2^63-1 at " + dim_field + ")");
      }
    }
    const uint64_t type_at = cur_.pos();
    TANDEM_ASSIGN_OR_RETURN(const uint32_t type_id, cur_.read_u32(field + " type"));
    Result<TensorType> type = tensor_type_from_ggml_id(type_id);
    if (!type.ok()) return cur_.error_at(type_at, field + ": " + type.status().message());
    info.type = *type;
    const TensorTypeTraits traits = *tensor_type_traits(info.type);
    if (ne[0] % traits.block_elements != 0) {
      return cur_.error_at(dims_at, field + ": row length ne[0] " + std::to_string(ne[0]) +
                                        " is not a multiple of the " + std::string(traits.name) +
                                        " block size " + std::to_string(traits.block_elements));
    }
    Result<uint64_t> nbytes = tensor_type_bytes(info.type, n_elements);
    if (!nbytes.ok()) {
      return cur_.error_at(type_at, field + ": size overflow: " + nbytes.status().message());
    }
    const uint64_t off_at = cur_.pos();
    TANDEM_ASSIGN_OR_RETURN(const uint64_t rel, cur_.read_u64(field + " offset"));
    if (rel % file_.alignment_ != 0) {
      return cur_.error_at(off_at, field + ": data offset " + std::to_string(rel) +
                                       " is not a multiple of the alignment " +
                                       std::to_string(file_.alignment_));
    }
    info.shape.assign(ne.rbegin(), ne.rend());
    info.n_elements = n_elements;
    info.file_offset = rel;  // relative for now; made absolute once data_offset is known
    pending.push_back(Pending{*nbytes, off_at});
    file_.tensor_index_.emplace(tname, file_.tensors_.size());
    file_.tensors_.push_back(std::move(info));
  }
  return {};
}

Status GgufParser::run(GgufFile& file, const GgufLimits& limits) {
  Cursor cur(file.bytes_, file.name_);
  Impl p(file, limits, cur);
  uint64_t n_tensors = 0;
  uint64_t n_kv = 0;
  TANDEM_RETURN_IF_ERROR(p.header(n_tensors, n_kv));
  TANDEM_RETURN_IF_ERROR(p.metadata(n_kv));
  std::vector<Pending> pending;
  TANDEM_RETURN_IF_ERROR(p.tensor_infos(n_tensors, pending));

  // The data section starts at the end of the tensor infos, aligned up.
  const uint64_t end = cur.pos();
  const uint64_t a = file.alignment_;
  uint64_t data_offset = 0;
  if (__builtin_add_overflow(end, a - 1, &data_offset)) {
    return cur.error_at(end, "data section: offset overflows when aligned to " + std::to_string(a));
  }
  data_offset &= ~(a - 1);
  file.data_offset_ = data_offset;

  struct Range {
    uint64_t begin;
    uint64_t end;
    size_t index;
  };
  std::vector<Range> ranges;
  ranges.reserve(file.tensors_.size());
  for (size_t i = 0; i < file.tensors_.size(); ++i) {
    TensorInfo& t = file.tensors_[i];
    const uint64_t rel = t.file_offset;
    uint64_t begin = 0;
    uint64_t stop = 0;
    const uint64_t nbytes = pending[i].bytes;
    if (__builtin_add_overflow(data_offset, rel, &begin) ||
        __builtin_add_overflow(begin, nbytes, &stop) || stop > cur.size()) {
      return cur.error_at(pending[i].offset_field_at,
                          "tensor " + quoted(t.name) + ": data (data section offset " +
                              std::to_string(data_offset) + " + " + std::to_string(rel) + ", " +
                              std::to_string(nbytes) +
                              " bytes) extends past the end of the file (" +
                              std::to_string(cur.size()) + " bytes)");
    }
    t.file_offset = begin;
    t.data = file.bytes_.subspan(begin, nbytes);
    ranges.push_back(Range{begin, stop, i});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& x, const Range& y) { return x.begin < y.begin; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].begin < ranges[i - 1].end) {
      const TensorInfo& t = file.tensors_[ranges[i].index];
      const TensorInfo& prev = file.tensors_[ranges[i - 1].index];
      return cur.error_at(
          pending[ranges[i].index].offset_field_at,
          "tensor " + quoted(t.name) + ": data [" + std::to_string(ranges[i].begin) + ", " +
              std::to_string(ranges[i].end) + ") overlaps tensor " + quoted(prev.name) + " [" +
              std::to_string(ranges[i - 1].begin) + ", " + std::to_string(ranges[i - 1].end) + ")");
    }
  }
  return {};
}

}  // namespace tandem::model
