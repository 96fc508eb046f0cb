// GgufValue: typed accessors and rendering of one GGUF metadata value.
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>

#include "engine/model/gguf_file.h"
#include "engine/model/gguf_wire.h"

namespace tandem::model {

std::string_view gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
      return "UINT8";
    case GgufType::kInt8:
      return "INT8";
    case GgufType::kUint16:
      return "UINT16";
    case GgufType::kInt16:
      return "INT16";
    case GgufType::kUint32:
      return "UINT32";
    case GgufType::kInt32:
      return "INT32";
    case GgufType::kFloat32:
      return "FLOAT32";
    case GgufType::kBool:
      return "BOOL";
    case GgufType::kString:
      return "STRING";
    case GgufType::kArray:
      return "ARRAY";
    case GgufType::kUint64:
      return "UINT64";
    case GgufType::kInt64:
      return "INT64";
    case GgufType::kFloat64:
      return "FLOAT64";
  }
  return "UNKNOWN";
}

namespace {

bool is_signed_int(GgufType t) {
  return t == GgufType::kInt8 || t == GgufType::kInt16 || t == GgufType::kInt32 ||
         t == GgufType::kInt64;
}

// The value of an integer as a sign flag and magnitude-preserving pair (negative, as_i64/as_u64).
struct IntValue {
  bool negative = false;
  int64_t as_signed = 0;
  uint64_t as_unsigned = 0;
};

IntValue decode_int(GgufType t, uint64_t bits) {
  IntValue v;
  int64_t s = 0;
  switch (t) {
    case GgufType::kInt8:
      s = static_cast<int8_t>(bits);
      break;
    case GgufType::kInt16:
      s = static_cast<int16_t>(bits);
      break;
    case GgufType::kInt32:
      s = static_cast<int32_t>(bits);
      break;
    case GgufType::kInt64:
      s = static_cast<int64_t>(bits);
      break;
    default:
      v.as_unsigned = bits;
      v.as_signed = static_cast<int64_t>(bits);  // only meaningful when bits <= INT64_MAX
      return v;
  }
  v.negative = s < 0;
  v.as_signed = s;
  v.as_unsigned = static_cast<uint64_t>(s);
  return v;
}

Status wrong_type(GgufType actual, std::string_view expected) {
  return invalid_argument_error("is " + std::string(gguf_type_name(actual)) + ", expected " +
                                std::string(expected));
}

template <typename T>
Result<T> int_in_range(const GgufValue& v, GgufType type, uint64_t bits, std::string_view name) {
  if (!v.is_integer()) return wrong_type(type, "an integer");
  const IntValue iv = decode_int(type, bits);
  const bool src_signed = is_signed_int(type);
  bool fits = false;
  if (iv.negative) {
    if constexpr (std::numeric_limits<T>::is_signed) {
      fits = iv.as_signed >= static_cast<int64_t>(std::numeric_limits<T>::min());
    }
  } else if (src_signed || iv.as_unsigned <= static_cast<uint64_t>(INT64_MAX)) {
    fits =
        static_cast<uint64_t>(iv.as_signed) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  } else {
    fits = iv.as_unsigned <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  }
  if (!fits) {
    const std::string text =
        iv.negative ? std::to_string(iv.as_signed) : std::to_string(iv.as_unsigned);
    return out_of_range_error(std::string(gguf_type_name(type)) + " value " + text +
                              " does not fit " + std::string(name));
  }
  return iv.negative ? static_cast<T>(iv.as_signed) : static_cast<T>(iv.as_unsigned);
}

}  // namespace

GgufValue GgufValue::from_u64(GgufType type, uint64_t bits) {
  GgufValue v;
  v.type_ = type;
  v.bits_ = bits;
  return v;
}

GgufValue GgufValue::from_string(std::string_view s) {
  GgufValue v;
  v.type_ = GgufType::kString;
  v.string_ = s;
  return v;
}

GgufValue GgufValue::from_array(std::shared_ptr<const GgufArray> array) {
  GgufValue v;
  v.type_ = GgufType::kArray;
  v.array_ = std::move(array);
  return v;
}

bool GgufValue::is_integer() const {
  switch (type_) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64:
      return true;
    default:
      return false;
  }
}

bool GgufValue::is_float() const {
  return type_ == GgufType::kFloat32 || type_ == GgufType::kFloat64;
}

Result<uint64_t> GgufValue::to_u64() const {
  return int_in_range<uint64_t>(*this, type_, bits_, "UINT64");
}
Result<int64_t> GgufValue::to_i64() const {
  return int_in_range<int64_t>(*this, type_, bits_, "INT64");
}
Result<uint32_t> GgufValue::to_u32() const {
  return int_in_range<uint32_t>(*this, type_, bits_, "UINT32");
}
Result<int32_t> GgufValue::to_i32() const {
  return int_in_range<int32_t>(*this, type_, bits_, "INT32");
}

Result<double> GgufValue::to_f64() const {
  if (type_ == GgufType::kFloat32) {
    return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(bits_)));
  }
  if (type_ == GgufType::kFloat64) return std::bit_cast<double>(bits_);
  return wrong_type(type_, "FLOAT32 or FLOAT64");
}

Result<float> GgufValue::to_f32() const {
  if (type_ == GgufType::kFloat32) return std::bit_cast<float>(static_cast<uint32_t>(bits_));
  if (type_ != GgufType::kFloat64) return wrong_type(type_, "FLOAT32 or FLOAT64");
  const double d = std::bit_cast<double>(bits_);
  if (std::isfinite(d) && std::fabs(d) > static_cast<double>(std::numeric_limits<float>::max())) {
    return out_of_range_error("FLOAT64 value " + std::to_string(d) + " does not fit FLOAT32");
  }
  return static_cast<float>(d);
}

Result<bool> GgufValue::to_bool() const {
  if (type_ != GgufType::kBool) return wrong_type(type_, "BOOL");
  return bits_ != 0;
}

Result<std::string_view> GgufValue::to_string() const {
  if (type_ != GgufType::kString) return wrong_type(type_, "STRING");
  return string_;
}

GgufType GgufValue::array_type() const {
  return array_ ? array_->element_type : GgufType::kUint8;
}

uint64_t GgufValue::array_size() const {
  return array_ ? array_->size : 0;
}

GgufValue GgufValue::element(uint64_t i) const {
  TANDEM_CHECK(array_ != nullptr && i < array_->size);
  const GgufArray& a = *array_;
  if (a.element_type == GgufType::kString) return from_string(a.strings[i]);
  if (a.element_type == GgufType::kArray) return a.arrays[i];
  const size_t width = gguf_scalar_size(a.element_type);
  return from_u64(a.element_type, read_le(a.raw.data() + i * width, width));
}

Result<std::span<const std::string_view>> GgufValue::to_string_array() const {
  if (!is_array()) return wrong_type(type_, "ARRAY of STRING");
  if (array_->element_type != GgufType::kString) {
    return invalid_argument_error("is ARRAY of " +
                                  std::string(gguf_type_name(array_->element_type)) +
                                  ", expected ARRAY of STRING");
  }
  return std::span<const std::string_view>(array_->strings);
}

Result<std::vector<int64_t>> GgufValue::to_i64_array() const {
  if (!is_array()) return wrong_type(type_, "ARRAY of integers");
  std::vector<int64_t> out;
  out.reserve(array_->size);
  for (uint64_t i = 0; i < array_->size; ++i) {
    const GgufValue e = element(i);
    if (!e.is_integer()) {
      return invalid_argument_error("is ARRAY of " + std::string(gguf_type_name(e.type())) +
                                    ", expected ARRAY of integers");
    }
    Result<int64_t> v = e.to_i64();
    if (!v.ok()) return v.status().with_prefix("element " + std::to_string(i));
    out.push_back(*v);
  }
  return out;
}

Result<std::vector<float>> GgufValue::to_f32_array() const {
  if (!is_array()) return wrong_type(type_, "ARRAY of floats");
  std::vector<float> out;
  out.reserve(array_->size);
  for (uint64_t i = 0; i < array_->size; ++i) {
    const GgufValue e = element(i);
    if (!e.is_float()) {
      return invalid_argument_error("is ARRAY of " + std::string(gguf_type_name(e.type())) +
                                    ", expected ARRAY of FLOAT32 or FLOAT64");
    }
    Result<float> v = e.to_f32();
    if (!v.ok()) return v.status().with_prefix("element " + std::to_string(i));
    out.push_back(*v);
  }
  return out;
}

Result<std::vector<bool>> GgufValue::to_bool_array() const {
  if (!is_array() || array_->element_type != GgufType::kBool) {
    return invalid_argument_error("is not an ARRAY of BOOL");
  }
  std::vector<bool> out;
  out.reserve(array_->size);
  for (uint64_t i = 0; i < array_->size; ++i) out.push_back(array_->raw[i] != 0);
  return out;
}

namespace {
std::string quote(std::string_view s) {
  constexpr size_t kMaxShown = 64;
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > kMaxShown) out += "...";
  out += '"';
  return out;
}

std::string scalar_text(const GgufValue& v) {
  if (v.is_string()) return quote(*v.to_string());
  if (v.type() == GgufType::kBool) return *v.to_bool() ? "true" : "false";
  if (v.is_float()) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", *v.to_f64());
    return buf;
  }
  Result<int64_t> s = v.to_i64();
  if (s.ok()) return std::to_string(*s);
  return std::to_string(*v.to_u64());
}
}  // namespace

std::string GgufValue::debug_string(size_t max_elements) const {
  if (!is_array()) return std::string(gguf_type_name(type_)) + " " + scalar_text(*this);
  std::string out = "ARRAY[" + std::string(gguf_type_name(array_->element_type)) + " x " +
                    std::to_string(array_->size) + "] [";
  for (uint64_t i = 0; i < array_->size && i < max_elements; ++i) {
    if (i > 0) out += ", ";
    const GgufValue e = element(i);
    out += e.is_array() ? e.debug_string(max_elements) : scalar_text(e);
  }
  if (array_->size > max_elements) out += ", ...";
  out += "]";
  return out;
}

}  // namespace tandem::model
