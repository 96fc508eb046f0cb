// Checks that messages built with Tandem's generated C++ classes serialize to exactly the bytes
// the smg-grpc-proto Python stubs produce for the same field values, and parse them back whole.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>
#include <catch2/catch.hpp>

#include <fstream>
#include <iomanip>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "smg/grpc/common/common.pb.h"
#include "vllm/grpc/engine/vllm_engine.pb.h"

namespace {

namespace pb = google::protobuf;
using nlohmann::json;

const std::string kFixtureDir = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/proto/";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  INFO("fixture " << path);
  REQUIRE(in.good());
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

json load_cases() {
  (void)vllm::grpc::engine::GenerateRequest::descriptor();
  (void)smg::grpc::common::KvEventBatch::descriptor();
  json parsed = json::parse(read_file(kFixtureDir + "roundtrip_cases.json"), nullptr, false);
  REQUIRE_FALSE(parsed.is_discarded());
  REQUIRE(parsed["cases"].is_array());
  return parsed;
}

std::string serialize_deterministic(const pb::Message& message) {
  std::string out;
  {
    pb::io::StringOutputStream stream(&out);
    pb::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return out;
}

// Where two byte strings first differ, with a few bytes of each around it, in hex.
std::string first_difference(const std::string& expected, const std::string& actual) {
  size_t at = 0;
  while (at < expected.size() && at < actual.size() && expected[at] == actual[at]) ++at;
  std::ostringstream out;
  out << "sizes " << expected.size() << " (python) vs " << actual.size() << " (ours); first "
      << "difference at byte " << at << ":";
  for (const std::string* s : {&expected, &actual}) {
    out << "\n ";
    for (size_t i = at; i < s->size() && i < at + 12; ++i) {
      out << ' ' << std::hex << std::setw(2) << std::setfill('0')
          << (static_cast<unsigned>(static_cast<unsigned char>((*s)[i])));
    }
  }
  return out.str();
}

// Counts unknown fields anywhere in `message` (fields our schema does not know).
int unknown_field_count(const pb::Message& message) {
  const pb::Reflection& refl = *message.GetReflection();
  int count = refl.GetUnknownFields(message).field_count();
  std::vector<const pb::FieldDescriptor*> fields;
  refl.ListFields(message, &fields);
  for (const pb::FieldDescriptor* f : fields) {
    if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int i = 0; i < refl.FieldSize(message, f); ++i) {
        count += unknown_field_count(refl.GetRepeatedMessage(message, f, i));
      }
    } else {
      count += unknown_field_count(refl.GetMessage(message, f));
    }
  }
  return count;
}

std::unique_ptr<pb::Message> new_message(const std::string& full_name) {
  const pb::Descriptor* d = pb::DescriptorPool::generated_pool()->FindMessageTypeByName(full_name);
  if (d == nullptr) return nullptr;
  return std::unique_ptr<pb::Message>(
      pb::MessageFactory::generated_factory()->GetPrototype(d)->New());
}

std::string case_bytes(const json& cases, const std::string& name) {
  for (const json& c : cases["cases"]) {
    if (c["name"] == name) return read_file(kFixtureDir + c["bin"].get<std::string>());
  }
  FAIL("no round-trip case " << name);
  return "";
}

}  // namespace

TEST_CASE("our classes serialize the Python stubs' field values to the same bytes", "[proto]") {
  const json cases = load_cases();
  REQUIRE(cases["cases"].size() >= 10);
  for (const json& c : cases["cases"]) {
    const std::string name = c["name"].get<std::string>();
    SECTION(name) {
      const std::string expected = read_file(kFixtureDir + c["bin"].get<std::string>());
      REQUIRE(expected.size() == c["size"].get<size_t>());
      std::unique_ptr<pb::Message> message = new_message(c["type"].get<std::string>());
      INFO("type " << c["type"].get<std::string>());
      REQUIRE(message != nullptr);
      const pb::util::Status parsed =
          pb::util::JsonStringToMessage(c["values"].dump(), message.get());
      INFO("json " << parsed.ToString());
      REQUIRE(parsed.ok());
      const std::string ours = serialize_deterministic(*message);
      INFO(first_difference(expected, ours));
      CHECK(ours == expected);
    }
  }
}

TEST_CASE("our classes parse the Python stubs' bytes with no unknown field", "[proto]") {
  const json cases = load_cases();
  for (const json& c : cases["cases"]) {
    const std::string name = c["name"].get<std::string>();
    SECTION(name) {
      const std::string bytes = read_file(kFixtureDir + c["bin"].get<std::string>());
      std::unique_ptr<pb::Message> message = new_message(c["type"].get<std::string>());
      REQUIRE(message != nullptr);
      REQUIRE(message->ParseFromString(bytes));
      CHECK(unknown_field_count(*message) == 0);
      const std::string again = serialize_deterministic(*message);
      INFO(first_difference(bytes, again));
      CHECK(again == bytes);
    }
  }
}

TEST_CASE("a GenerateRequest built with setters equals the Python bytes", "[proto]") {
  namespace ve = vllm::grpc::engine;
  const json cases = load_cases();
  ve::GenerateRequest req;
  req.set_request_id("req-1");
  req.mutable_tokenized()->set_original_text("Hi");
  for (uint32_t id : {1u, 300u, 70000u}) req.mutable_tokenized()->add_input_ids(id);
  ve::SamplingParams& sp = *req.mutable_sampling_params();
  sp.set_temperature(0.0f);  // Explicit presence: greedy, not "unset = 1.0".
  sp.set_top_p(0.9f);
  sp.set_top_k(40);
  sp.set_min_p(0.05f);
  sp.set_repetition_penalty(1.1f);
  sp.set_max_tokens(16);
  sp.set_min_tokens(2);
  sp.add_stop("</s>");
  sp.add_stop("\n\n");
  sp.add_stop_token_ids(2);
  sp.add_stop_token_ids(151645);
  sp.set_skip_special_tokens(true);
  sp.set_n(1);
  sp.set_logprobs(5);
  sp.set_seed(-7);
  sp.set_include_stop_str_in_output(true);
  sp.set_truncate_prompt_tokens(-1);
  (*sp.mutable_logit_bias())[42] = -100.0f;
  sp.mutable_choice()->add_choices("yes");
  sp.mutable_choice()->add_choices("no");
  req.set_stream(true);
  req.set_kv_transfer_params_json("{}");
  req.set_data_parallel_rank(0);

  const std::string expected = case_bytes(cases, "generate_request_tokenized");
  const std::string ours = serialize_deterministic(req);
  INFO(first_difference(expected, ours));
  CHECK(ours == expected);

  ve::GenerateRequest back;
  REQUIRE(back.ParseFromString(expected));
  CHECK(back.input_case() == ve::GenerateRequest::kTokenized);
  CHECK(back.sampling_params().has_temperature());
  CHECK(back.sampling_params().temperature() == 0.0f);
  CHECK(back.sampling_params().constraint_case() == ve::SamplingParams::kChoice);
  CHECK(back.sampling_params().logit_bias().at(42) == -100.0f);
  CHECK(back.has_data_parallel_rank());
}

TEST_CASE("a complete that matched stop token 0 keeps the oneof set", "[proto]") {
  namespace ve = vllm::grpc::engine;
  const json cases = load_cases();
  ve::GenerateResponse resp;
  resp.mutable_complete()->set_finish_reason("stop");
  resp.mutable_complete()->set_matched_token_id(0);
  const std::string expected = case_bytes(cases, "generate_response_complete_token_zero");
  CHECK(serialize_deterministic(resp) == expected);

  ve::GenerateResponse back;
  REQUIRE(back.ParseFromString(expected));
  REQUIRE(back.response_case() == ve::GenerateResponse::kComplete);
  CHECK(back.complete().matched_stop_case() == ve::GenerateComplete::kMatchedTokenId);
  CHECK(back.complete().matched_token_id() == 0);
}
