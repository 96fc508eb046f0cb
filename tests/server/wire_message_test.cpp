// Tests of the raw wire messages: what describe_wire_problem says about requests protobuf refuses
// (invalid UTF-8 by field path, malformed data by offset), and parse/serialize round trips.
#include "server/wire_message.h"

#include <catch2/catch.hpp>
#include <string>

#include "vllm/grpc/engine/vllm_engine.pb.h"

namespace tandem::server {
namespace {

namespace wire = vllm::grpc::engine;

// `message` serialized, with the one occurrence of `marker` replaced by `bytes`.
std::string with_bytes(const wire::GenerateRequest& message, const std::string& marker,
                       const std::string& bytes) {
  std::string data = message.SerializeAsString();
  const size_t at = data.find(marker);
  REQUIRE(at != std::string::npos);
  REQUIRE(marker.size() == bytes.size());  // the length prefixes stay right
  data.replace(at, marker.size(), bytes);
  return data;
}

grpc::ByteBuffer buffer_of(const std::string& data) {
  grpc::Slice slice(data);
  return grpc::ByteBuffer(&slice, 1);
}

TEST_CASE("describe_wire_problem names the string field holding invalid UTF-8", "[server]") {
  wire::GenerateRequest r;
  r.set_request_id("id-QQ-1");
  r.mutable_sampling_params()->add_stop("fine");
  r.mutable_sampling_params()->add_stop("stopZZ");
  const wire::GenerateRequest valid = r;
  wire::GenerateRequest parsed;

  // The request id: an overlong encoding of '(' is not UTF-8.
  const std::string bad_id = with_bytes(valid, "QQ", "\xC0\xA8");
  REQUIRE_FALSE(parsed.ParseFromString(bad_id));
  const std::string id_problem =
      describe_wire_problem(bad_id, *wire::GenerateRequest::descriptor());
  CHECK_THAT(id_problem, Catch::Contains("field 'request_id' is not valid UTF-8 (byte 3"));

  // The second stop string, inside the nested SamplingParams.
  const std::string bad_stop = with_bytes(valid, "ZZ", "\xFF\xFE");
  REQUIRE_FALSE(parsed.ParseFromString(bad_stop));
  CHECK_THAT(describe_wire_problem(bad_stop, *wire::GenerateRequest::descriptor()),
             Catch::Contains("field 'sampling_params.stop[1]' is not valid UTF-8 (byte 4"));

  // A truncated multi-byte sequence at the end of a string.
  const std::string truncated = with_bytes(valid, "Q-1", "Q-\xE2");
  REQUIRE_FALSE(parsed.ParseFromString(truncated));
  CHECK_THAT(describe_wire_problem(truncated, *wire::GenerateRequest::descriptor()),
             Catch::Contains("field 'request_id' is not valid UTF-8 (byte 6"));
}

TEST_CASE("describe_wire_problem gives the offset of malformed wire data", "[server]") {
  const auto* type = wire::GenerateRequest::descriptor();
  wire::GenerateRequest parsed;
  // Field 1 (request_id) claims 100 bytes; 2 follow.
  const std::string too_long(
      "\x0A\x64"
      "ab",
      4);
  REQUIRE_FALSE(parsed.ParseFromString(too_long));
  CHECK(describe_wire_problem(too_long, *type) ==
        "malformed protobuf at byte 0 ('request_id'): a length past the end of the data");
  // A varint that never ends.
  const std::string endless("\x28\xFF\xFF", 3);
  REQUIRE_FALSE(parsed.ParseFromString(endless));
  CHECK_THAT(describe_wire_problem(endless, *type),
             Catch::Contains("at byte 0 ('stream'): a bad varint"));
  // Wire type 7 does not exist; field number 0 is invalid.
  const std::string bad_type("\x0A\x01x\x0F", 4);
  REQUIRE_FALSE(parsed.ParseFromString(bad_type));
  CHECK_THAT(describe_wire_problem(bad_type, *type), Catch::Contains("at byte 3"));
  CHECK_THAT(describe_wire_problem(bad_type, *type), Catch::Contains("wire type 7"));
  const std::string field_zero("\x00\x01", 2);
  REQUIRE_FALSE(parsed.ParseFromString(field_zero));
  CHECK_THAT(describe_wire_problem(field_zero, *type), Catch::Contains("field number 0"));
  // Inside a nested message (sampling_params = 4): its field 10 (stop) runs past its end.
  const std::string nested("\x22\x03\x52\x05x", 5);
  REQUIRE_FALSE(parsed.ParseFromString(nested));
  CHECK(describe_wire_problem(nested, *type) ==
        "malformed protobuf at byte 2 ('sampling_params.stop[0]'): a length past the end of the "
        "data");
}

TEST_CASE("parse_wire_message: INVALID_ARGUMENT naming the type; round trip", "[server]") {
  wire::GenerateRequest r;
  r.set_request_id("id-QQ");
  r.mutable_tokenized()->add_input_ids(7);
  wire::GenerateRequest parsed;
  REQUIRE(parse_wire_message(buffer_of(r.SerializeAsString()), parsed).ok());
  CHECK(parsed.request_id() == "id-QQ");
  CHECK(parsed.tokenized().input_ids(0) == 7);

  const grpc::Status bad = parse_wire_message(buffer_of(with_bytes(r, "QQ", "\xED\xA0")), parsed);
  CHECK(bad.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(bad.error_message(),
             Catch::StartsWith("the request is not a valid vllm.grpc.engine.GenerateRequest: "
                               "field 'request_id' is not valid UTF-8"));

  // An empty message (no bytes, possibly no buffer at all) is the default message.
  wire::HealthCheckRequest empty;
  CHECK(parse_wire_message(grpc::ByteBuffer(), empty).ok());

  grpc::ByteBuffer out;
  REQUIRE(serialize_wire_message(r, &out).ok());
  wire::GenerateRequest back;
  REQUIRE(parse_wire_message(out, back).ok());
  CHECK(back.SerializeAsString() == r.SerializeAsString());
}

}  // namespace
}  // namespace tandem::server
