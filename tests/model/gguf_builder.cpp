// GgufBuilder: serializes the header, metadata, tensor infos and data of a test GGUF image.
#include "tests/model/gguf_builder.h"

#include <bit>
#include <type_traits>

#include "kernels/tensor_type.h"

namespace tandem::testing {

namespace {
void append(std::vector<uint8_t>& out, const std::vector<uint8_t>& bytes) {
  out.insert(out.end(), bytes.begin(), bytes.end());
}
}  // namespace

std::vector<uint8_t> GgufBuilder::le(uint64_t v, size_t width) {
  std::vector<uint8_t> out(width);
  for (size_t i = 0; i < width; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
  return out;
}

std::vector<uint8_t> GgufBuilder::string_payload(const std::string& s) {
  std::vector<uint8_t> out = le(s.size(), 8);
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

std::vector<uint8_t> GgufBuilder::array_payload(uint32_t element_type, uint64_t count,
                                                const std::vector<uint8_t>& elements) {
  std::vector<uint8_t> out = le(element_type, 4);
  append(out, le(count, 8));
  append(out, elements);
  return out;
}

GgufBuilder& GgufBuilder::kv_scalar(const std::string& key, uint32_t type_id, uint64_t bits,
                                    size_t width) {
  kvs_.push_back(Kv{key, type_id, le(bits, width)});
  return *this;
}

GgufBuilder& GgufBuilder::kv_f32(const std::string& key, float v) {
  return kv_scalar(key, 6, std::bit_cast<uint32_t>(v), 4);
}

GgufBuilder& GgufBuilder::kv_f64(const std::string& key, double v) {
  return kv_scalar(key, 12, std::bit_cast<uint64_t>(v), 8);
}

GgufBuilder& GgufBuilder::kv_string(const std::string& key, const std::string& v) {
  kvs_.push_back(Kv{key, 8, string_payload(v)});
  return *this;
}

GgufBuilder& GgufBuilder::kv_string_array(const std::string& key,
                                          const std::vector<std::string>& v) {
  std::vector<uint8_t> elements;
  for (const std::string& s : v) append(elements, string_payload(s));
  kvs_.push_back(Kv{key, 9, array_payload(8, v.size(), elements)});
  return *this;
}

GgufBuilder& GgufBuilder::kv_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  std::vector<uint8_t> elements;
  for (int32_t x : v) append(elements, le(u(x), 4));
  kvs_.push_back(Kv{key, 9, array_payload(5, v.size(), elements)});
  return *this;
}

GgufBuilder& GgufBuilder::kv_f32_array(const std::string& key, const std::vector<float>& v) {
  std::vector<uint8_t> elements;
  for (float x : v) append(elements, le(std::bit_cast<uint32_t>(x), 4));
  kvs_.push_back(Kv{key, 9, array_payload(6, v.size(), elements)});
  return *this;
}

GgufBuilder& GgufBuilder::kv_raw(const std::string& key, uint32_t type_id,
                                 std::vector<uint8_t> payload) {
  kvs_.push_back(Kv{key, type_id, std::move(payload)});
  return *this;
}

GgufBuilder& GgufBuilder::tensor(const std::string& name, uint32_t type_id,
                                 std::vector<uint64_t> ne, std::optional<uint64_t> offset,
                                 std::optional<uint64_t> data_bytes) {
  tensors_.push_back(Tensor{name, type_id, std::move(ne), offset, data_bytes});
  return *this;
}

std::vector<uint8_t> GgufBuilder::build() {
  offsets_.clear();
  std::vector<uint8_t> out(magic_.begin(), magic_.end());
  append(out, le(version_, 4));
  append(out, le(n_tensors_override_.value_or(tensors_.size()), 8));
  append(out, le(n_kv_override_.value_or(kvs_.size()), 8));
  for (const Kv& kv : kvs_) {
    offsets_["kv:" + kv.key] = out.size();
    append(out, string_payload(kv.key));
    append(out, le(kv.type_id, 4));
    append(out, kv.payload);
  }
  // Place the data: explicit offsets as given, the others packed and aligned after the last one.
  std::vector<uint64_t> sizes;
  std::vector<uint64_t> rel;
  uint64_t next = 0;
  for (const Tensor& t : tensors_) {
    uint64_t bytes = 0;
    if (t.data_bytes) {
      bytes = *t.data_bytes;
    } else {
      uint64_t n = 1;
      bool overflow = false;
      for (uint64_t d : t.ne) overflow = overflow || __builtin_mul_overflow(n, d, &n);
      Result<uint64_t> b = tensor_type_bytes(static_cast<TensorType>(t.type_id), n);
      bytes = (!overflow && b.ok()) ? *b : 0;
    }
    const uint64_t off = t.offset.value_or((next + alignment_ - 1) / alignment_ * alignment_);
    sizes.push_back(bytes);
    rel.push_back(off);
    // Hostile offsets/sizes far outside any real image are written but not backed by data.
    constexpr uint64_t kMaxBacked = uint64_t{1} << 24;
    if (off <= kMaxBacked && bytes <= kMaxBacked && off + bytes > next) next = off + bytes;
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    offsets_["tensor:" + t.name] = out.size();
    append(out, string_payload(t.name));
    append(out, le(t.ne.size(), 4));
    for (uint64_t d : t.ne) append(out, le(d, 8));
    append(out, le(t.type_id, 4));
    append(out, le(rel[i], 8));
  }
  const uint64_t data_section = (out.size() + alignment_ - 1) / alignment_ * alignment_;
  offsets_["data_section"] = data_section;
  if (tensors_.empty()) return out;
  out.resize(data_section + next, 0);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    offsets_["data:" + tensors_[i].name] = data_section + rel[i];
    if (rel[i] > next || sizes[i] > next - rel[i]) continue;
    for (uint64_t b = 0; b < sizes[i]; ++b) {
      out[data_section + rel[i] + b] = static_cast<uint8_t>(i * 37 + b);
    }
  }
  return out;
}

}  // namespace tandem::testing
