// Raw wire messages: parsing with a diagnosis of what is wrong, and serialization.
#include "server/wire_message.h"

#include <cstdint>
#include <map>
#include <optional>

#include "engine/tokenizer/utf8.h"

namespace tandem::server {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// protobuf's default recursion limit for nested messages (io::CodedInputStream).
constexpr int kMaxDepth = 100;

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

// Walks one message's fields over [begin, end) of the whole buffer; offsets in messages are
// positions in the whole request.
class WireWalker {
 public:
  explicit WireWalker(std::string_view bytes) : bytes_(bytes) {}

  // The first problem in the message of `type` spanning [begin, end), or nullopt.
  std::optional<std::string> message(size_t begin, size_t end, const Descriptor* type,
                                     const std::string& path, int depth) {
    if (depth > kMaxDepth) {
      return "messages nested deeper than " + std::to_string(kMaxDepth) + " levels at " +
             where(path);
    }
    std::map<int, int> seen;  // occurrences per field number, for "field[i]"
    size_t pos = begin;
    while (pos < end) {
      const size_t tag_at = pos;
      const std::optional<uint64_t> tag = varint(pos, end);
      if (!tag.has_value() || *tag > UINT32_MAX) return malformed(tag_at, path, "a bad field tag");
      const auto number = static_cast<int>(*tag >> 3);
      const auto wire_type = static_cast<uint32_t>(*tag & 7);
      if (number == 0) return malformed(tag_at, path, "field number 0");
      const FieldDescriptor* field = type != nullptr ? type->FindFieldByNumber(number) : nullptr;
      std::string field_path = field != nullptr ? join(path, field->name()) : path;
      if (field != nullptr && field->is_repeated()) {
        field_path += "[" + std::to_string(seen[number]++) + "]";
      }
      switch (wire_type) {
        case kVarint:
          if (!varint(pos, end).has_value()) return malformed(tag_at, field_path, "a bad varint");
          break;
        case kFixed64:
        case kFixed32: {
          const size_t width = wire_type == kFixed64 ? 8 : 4;
          if (end - pos < width) return malformed(tag_at, field_path, "a truncated fixed field");
          pos += width;
          break;
        }
        case kLengthDelimited: {
          const std::optional<uint64_t> length = varint(pos, end);
          if (!length.has_value() || *length > end - pos) {
            return malformed(tag_at, field_path, "a length past the end of the data");
          }
          const size_t content = pos;
          pos += static_cast<size_t>(*length);
          if (field == nullptr) break;
          if (field->type() == FieldDescriptor::TYPE_STRING) {
            if (std::optional<std::string> bad = utf8(content, pos, field_path)) return bad;
          } else if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
            if (std::optional<std::string> bad =
                    message(content, pos, field->message_type(), field_path, depth + 1)) {
              return bad;
            }
          }
          break;
        }
        case kStartGroup:
          if (std::optional<std::string> bad = group(pos, end, number, field_path, depth + 1)) {
            return bad;
          }
          break;
        default:
          return malformed(tag_at, field_path,
                           "wire type " + std::to_string(wire_type) +
                               (wire_type == kEndGroup ? " (an unmatched end of group)" : ""));
      }
    }
    return std::nullopt;
  }

 private:
  // Skips a group (a deprecated encoding, only as an unknown field here) up to its end tag.
  std::optional<std::string> group(size_t& pos, size_t end, int number, const std::string& path,
                                   int depth) {
    if (depth > kMaxDepth) return malformed(pos, path, "groups nested too deeply");
    while (pos < end) {
      const size_t tag_at = pos;
      const std::optional<uint64_t> tag = varint(pos, end);
      if (!tag.has_value()) return malformed(tag_at, path, "a bad field tag");
      const auto wire_type = static_cast<uint32_t>(*tag & 7);
      const auto inner = static_cast<int>(*tag >> 3);
      switch (wire_type) {
        case kVarint:
          if (!varint(pos, end).has_value()) return malformed(tag_at, path, "a bad varint");
          break;
        case kFixed64:
        case kFixed32: {
          const size_t width = wire_type == kFixed64 ? 8 : 4;
          if (end - pos < width) return malformed(tag_at, path, "a truncated fixed field");
          pos += width;
          break;
        }
        case kLengthDelimited: {
          const std::optional<uint64_t> length = varint(pos, end);
          if (!length.has_value() || *length > end - pos) {
            return malformed(tag_at, path, "a length past the end of the data");
          }
          pos += static_cast<size_t>(*length);
          break;
        }
        case kStartGroup:
          if (std::optional<std::string> bad = group(pos, end, inner, path, depth + 1)) return bad;
          break;
        case kEndGroup:
          if (inner != number) return malformed(tag_at, path, "a mismatched end of group");
          return std::nullopt;
        default:
          return malformed(tag_at, path, "wire type " + std::to_string(wire_type));
      }
    }
    return malformed(end, path, "a group that does not end");
  }

  std::optional<uint64_t> varint(size_t& pos, size_t end) const {
    uint64_t value = 0;
    for (int shift = 0; shift < 64 && pos < end; shift += 7) {
      const auto byte = static_cast<uint8_t>(bytes_[pos++]);
      value |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    return std::nullopt;
  }

  std::optional<std::string> utf8(size_t begin, size_t end, const std::string& path) const {
    std::string_view text = bytes_.substr(begin, end - begin);
    size_t offset = 0;
    while (offset < text.size()) {
      const tokenizer::Utf8Step step = tokenizer::utf8_step(text.substr(offset));
      if (step.kind != tokenizer::Utf8Step::kValid) {
        return "field '" + path + "' is not valid UTF-8 (byte " + std::to_string(offset) +
               " of the string); proto3 strings must be UTF-8";
      }
      offset += step.length;
    }
    return std::nullopt;
  }

  static std::string join(const std::string& path, const std::string& name) {
    return path.empty() ? name : path + "." + name;
  }
  static std::string where(const std::string& path) {
    return path.empty() ? "the top level" : "'" + path + "'";
  }
  static std::string malformed(size_t at, const std::string& path, const std::string& what) {
    return "malformed protobuf at byte " + std::to_string(at) + " (" + where(path) + "): " + what;
  }

  std::string_view bytes_;
};

}  // namespace

std::string describe_wire_problem(std::string_view bytes, const Descriptor& type) {
  WireWalker walker(bytes);
  if (std::optional<std::string> problem = walker.message(0, bytes.size(), &type, "", 0)) {
    return *problem;
  }
  return "protobuf refused the data (no field-level problem was found)";
}

grpc::Status parse_wire_message(const grpc::ByteBuffer& bytes, google::protobuf::Message& out) {
  out.Clear();
  grpc::Slice slice;  // stays empty for a zero-length message without a buffer
  if (bytes.Valid() && !bytes.DumpToSingleSlice(&slice).ok()) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "cannot read the request's bytes");
  }
  const std::string_view data(reinterpret_cast<const char*>(slice.begin()), slice.size());
  if (data.size() > static_cast<size_t>(INT32_MAX)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the request is over 2 GiB");
  }
  if (out.ParseFromArray(data.data(), static_cast<int>(data.size()))) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      "the request is not a valid " + out.GetDescriptor()->full_name() + ": " +
                          describe_wire_problem(data, *out.GetDescriptor()));
}

grpc::Status serialize_wire_message(const google::protobuf::Message& message,
                                    grpc::ByteBuffer* out) {
  std::string data;
  if (!message.SerializeToString(&data)) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "cannot serialize the " + message.GetDescriptor()->full_name() + " reply");
  }
  grpc::Slice slice(data);
  *out = grpc::ByteBuffer(&slice, 1);
  return grpc::Status::OK;
}

}  // namespace tandem::server
