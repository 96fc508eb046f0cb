// Checks Tandem's generated descriptors against the SMG gateway's smg-grpc-proto package (the
// vllm.grpc.engine wire API) and against the locked tandem.v1 field numbers.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "smg/grpc/common/common.pb.h"
#include "tandem/v1/tandem.pb.h"
#include "tests/proto/canonical_descriptor.h"
#include "vllm/grpc/engine/vllm_engine.pb.h"

namespace {

namespace pb = google::protobuf;
using nlohmann::json;
using tandem::proto_test::canonical_differences;
using tandem::proto_test::canonical_service;

json load_fixture(const std::string& name) {
  const std::string path = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/proto/" + name;
  std::ifstream in(path);
  INFO("fixture " << path);
  REQUIRE(in.good());
  std::stringstream buffer;
  buffer << in.rdbuf();
  json parsed = json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
  REQUIRE_FALSE(parsed.is_discarded());
  return parsed;
}

// Descriptors of a statically linked library register only when its object file is linked;
// naming one class of each file makes sure the generated pool knows them.
const pb::ServiceDescriptor* find_service(const char* full_name) {
  (void)vllm::grpc::engine::GenerateRequest::descriptor();
  (void)smg::grpc::common::KvEventBatch::descriptor();
  (void)tandem::v1::GetPlacementResponse::descriptor();
  return pb::DescriptorPool::generated_pool()->FindServiceByName(full_name);
}

// "PlacementPolicy" -> "PLACEMENT_POLICY".
std::string upper_snake(const std::string& camel) {
  std::string out;
  for (char c : camel) {
    if (c >= 'A' && c <= 'Z' && !out.empty()) out += '_';
    out += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  }
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

}  // namespace

TEST_CASE("VllmEngine matches smg-grpc-proto field for field", "[proto]") {
  const json reference = load_fixture("vllm_engine_reference.json");
  const pb::ServiceDescriptor* service = find_service("vllm.grpc.engine.VllmEngine");
  REQUIRE(service != nullptr);
  const json ours = canonical_service(*service);

  // The one deliberate difference: protoc 3.21's C++ generator cannot emit a field named
  // `descriptor`; number, type and JSON name stay the gateway's, so both wire forms are equal.
  const std::vector<std::string> known = {
      "message smg.grpc.common.RemoteTensorHandle field 2 (descriptor): name reference "
      "\"descriptor\", ours \"descriptor_bytes\""};
  const std::vector<std::string> diffs = canonical_differences(reference, ours);
  INFO("reference: smg-grpc-proto " << reference["generator"].value("smg-grpc-proto", "?"));
  INFO("differences:\n" << joined(diffs));
  CHECK(diffs == known);
  // The fixture is not trivially small: every RPC and every shared type is there.
  CHECK(reference["services"]["vllm.grpc.engine.VllmEngine"]["methods"].size() == 12);
  CHECK(ours["messages"].size() == reference["messages"].size());
  CHECK(ours["messages"].contains("smg.grpc.common.KvEventBatch"));
}

TEST_CASE("the wire diff names the message, field and attribute that differ", "[proto]") {
  const json reference = load_fixture("vllm_engine_reference.json");
  json changed = reference;
  json& fields = changed["messages"]["vllm.grpc.engine.SamplingParams"]["fields"];
  for (json& f : fields) {
    if (f["name"] == "top_k") f["type"] = "TYPE_INT32";
  }
  changed["messages"].erase("vllm.grpc.engine.AbortResponse");
  changed["enums"]["smg.grpc.common.Modality"]["values"].push_back(
      {{"name", "TEXT"}, {"number", 4}});

  const std::vector<std::string> diffs = canonical_differences(reference, changed);
  INFO(joined(diffs));
  REQUIRE(diffs.size() == 3);
  CHECK(diffs[0] == "message vllm.grpc.engine.AbortResponse: missing in ours");
  CHECK(diffs[1] ==
        "message vllm.grpc.engine.SamplingParams field 3 (top_k): type reference "
        "\"TYPE_UINT32\", ours \"TYPE_INT32\"");
  CHECK(diffs[2] ==
        "enum smg.grpc.common.Modality value 4 (TEXT): extra in ours, not in the "
        "reference");
}

TEST_CASE("tandem.v1 field numbers match the locked description", "[proto]") {
  const json reference = load_fixture("tandem_v1_reference.json");
  const pb::ServiceDescriptor* service = find_service("tandem.v1.Tandem");
  REQUIRE(service != nullptr);
  const std::vector<std::string> diffs =
      canonical_differences(reference, canonical_service(*service));
  INFO("tandem.proto changed: if on purpose, rerun scripts/fixtures/make_proto_fixtures.py\n"
       << joined(diffs));
  CHECK(diffs.empty());
  CHECK(service->method_count() == 4);
  CHECK(service->FindMethodByName("GetPlacement") != nullptr);
  CHECK(service->FindMethodByName("GetActivationStats") != nullptr);
  CHECK(service->FindMethodByName("DumpActivationStats") != nullptr);
  CHECK(service->FindMethodByName("GetRequestMoeCounters") != nullptr);
}

TEST_CASE("tandem.v1 keeps the conventions of a public API", "[proto]") {
  const pb::ServiceDescriptor* service = find_service("tandem.v1.Tandem");
  REQUIRE(service != nullptr);
  const pb::FileDescriptor& file = *service->file();
  // Every enum starts with an UNSPECIFIED zero value prefixed by the enum's name.
  for (int i = 0; i < file.enum_type_count(); ++i) {
    const pb::EnumDescriptor& e = *file.enum_type(i);
    INFO("enum " << e.full_name());
    REQUIRE(e.value_count() > 1);
    CHECK(e.value(0)->number() == 0);
    CHECK(e.value(0)->name().find("_UNSPECIFIED") != std::string::npos);
    const std::string prefix = upper_snake(e.name()) + "_";
    for (int v = 0; v < e.value_count(); ++v) CHECK(e.value(v)->name().rfind(prefix, 0) == 0);
  }
  // Each RPC has its own Request and Response message (so both can grow independently).
  for (int i = 0; i < service->method_count(); ++i) {
    const pb::MethodDescriptor& m = *service->method(i);
    CHECK(m.input_type()->name() == m.name() + "Request");
    CHECK(m.output_type()->name() == m.name() + "Response");
    CHECK_FALSE(m.client_streaming());
    CHECK_FALSE(m.server_streaming());
  }
}
