// GgufBuilder: writes small GGUF files in memory for tests, valid or deliberately broken.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tandem::testing {

// Builds a GGUF byte image: header, metadata, tensor infos, padding, tensor data. Every field is
// written exactly as given (no validation), so tests can produce hostile files. After build(),
// offset_of() tells where a named part starts, for tests that patch bytes or check the offset a
// reader reports. Single-threaded test helper.
class GgufBuilder {
 public:
  explicit GgufBuilder(uint32_t version = 3) : version_(version) {}

  // Metadata, in call order. Scalars are written little-endian with the given type id.
  GgufBuilder& kv_u8(const std::string& key, uint8_t v) { return kv_scalar(key, 0, v, 1); }
  GgufBuilder& kv_i8(const std::string& key, int8_t v) { return kv_scalar(key, 1, u(v), 1); }
  GgufBuilder& kv_u16(const std::string& key, uint16_t v) { return kv_scalar(key, 2, v, 2); }
  GgufBuilder& kv_i16(const std::string& key, int16_t v) { return kv_scalar(key, 3, u(v), 2); }
  GgufBuilder& kv_u32(const std::string& key, uint32_t v) { return kv_scalar(key, 4, v, 4); }
  GgufBuilder& kv_i32(const std::string& key, int32_t v) { return kv_scalar(key, 5, u(v), 4); }
  GgufBuilder& kv_f32(const std::string& key, float v);
  GgufBuilder& kv_bool(const std::string& key, bool v) { return kv_scalar(key, 7, v ? 1 : 0, 1); }
  GgufBuilder& kv_string(const std::string& key, const std::string& v);
  GgufBuilder& kv_u64(const std::string& key, uint64_t v) { return kv_scalar(key, 10, v, 8); }
  GgufBuilder& kv_i64(const std::string& key, int64_t v) { return kv_scalar(key, 11, u(v), 8); }
  GgufBuilder& kv_f64(const std::string& key, double v);
  GgufBuilder& kv_string_array(const std::string& key, const std::vector<std::string>& v);
  GgufBuilder& kv_i32_array(const std::string& key, const std::vector<int32_t>& v);
  GgufBuilder& kv_f32_array(const std::string& key, const std::vector<float>& v);
  // Any value: `type_id` then `payload` verbatim (for unknown types, nested arrays, lies).
  GgufBuilder& kv_raw(const std::string& key, uint32_t type_id, std::vector<uint8_t> payload);

  // A tensor. `ne` is GGUF order (innermost first). Without `offset`, the next aligned offset in
  // the data section is used. The data written is `data_bytes` (default: the size implied by
  // type and ne, 0 when that overflows) of a byte pattern that depends on the tensor's index.
  GgufBuilder& tensor(const std::string& name, uint32_t type_id, std::vector<uint64_t> ne,
                      std::optional<uint64_t> offset = std::nullopt,
                      std::optional<uint64_t> data_bytes = std::nullopt);

  // Alignment used to place tensor data (does NOT write general.alignment; use kv_u32 for that).
  GgufBuilder& data_alignment(uint64_t a) {
    alignment_ = a;
    return *this;
  }
  // Header overrides: the counts written instead of the real ones, the magic.
  GgufBuilder& n_tensors_override(uint64_t n) {
    n_tensors_override_ = n;
    return *this;
  }
  GgufBuilder& n_kv_override(uint64_t n) {
    n_kv_override_ = n;
    return *this;
  }
  GgufBuilder& magic(std::string m) {
    magic_ = std::move(m);
    return *this;
  }

  std::vector<uint8_t> build();

  // Where "kv:<key>", "tensor:<name>" (its info record), "data:<name>" (its bytes) or
  // "data_section" starts in the image build() returns (computed afresh, so it may be called
  // before build()). Throws std::out_of_range (a test failure) for an unknown part.
  uint64_t offset_of(const std::string& part) {
    build();
    return offsets_.at(part);
  }

  static std::vector<uint8_t> le(uint64_t v, size_t width);
  // Payload of an ARRAY value: element type, count, then `elements` verbatim.
  static std::vector<uint8_t> array_payload(uint32_t element_type, uint64_t count,
                                            const std::vector<uint8_t>& elements);
  // A u64 length followed by the bytes.
  static std::vector<uint8_t> string_payload(const std::string& s);

 private:
  template <typename T>
  static uint64_t u(T v) {
    return static_cast<uint64_t>(static_cast<std::make_unsigned_t<T>>(v));
  }
  GgufBuilder& kv_scalar(const std::string& key, uint32_t type_id, uint64_t bits, size_t width);

  struct Kv {
    std::string key;
    uint32_t type_id;
    std::vector<uint8_t> payload;
  };
  struct Tensor {
    std::string name;
    uint32_t type_id;
    std::vector<uint64_t> ne;
    std::optional<uint64_t> offset;
    std::optional<uint64_t> data_bytes;
  };

  uint32_t version_;
  uint64_t alignment_ = 32;
  std::string magic_ = "GGUF";
  std::optional<uint64_t> n_tensors_override_;
  std::optional<uint64_t> n_kv_override_;
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
  std::map<std::string, uint64_t> offsets_;
};

}  // namespace tandem::testing
