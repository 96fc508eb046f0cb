// Tests of the GenerateRequest -> engine Request mapping: the vLLM worker protocol's defaults
// (smg-vllm-worker.md §1.2) and what is refused instead of silently ignored.
#include "server/generate_request_mapping.h"

#include <catch2/catch.hpp>
#include <string>

namespace tandem::server {
namespace {

namespace wire = vllm::grpc::engine;

wire::GenerateRequest with_ids(std::initializer_list<uint32_t> ids) {
  wire::GenerateRequest r;
  r.set_request_id("r");
  for (uint32_t id : ids) r.mutable_tokenized()->add_input_ids(id);
  return r;
}

GenerateMappingLimits limits() {
  GenerateMappingLimits l;
  l.context_length = 8;
  return l;
}

TEST_CASE("unset and zero wire fields take the protocol's defaults", "[server]") {
  const Result<runtime::Request> r = to_engine_request(with_ids({5, 6}), limits(), nullptr);
  REQUIRE(r.ok());
  CHECK(r->id == "r");
  CHECK(r->prompt_token_ids == std::vector<int32_t>{5, 6});
  CHECK(r->sampling.temperature == 1.0f);           // unset
  CHECK(r->sampling.top_p == 1.0f);                 // 0
  CHECK(r->sampling.top_k == 0);                    // off
  CHECK(r->sampling.repetition_penalty == 1.0f);    // 0
  CHECK_FALSE(r->sampling.max_tokens.has_value());  // up to the context
  CHECK_FALSE(r->sampling.seed.has_value());
  CHECK(r->n == 1);  // 0
}

TEST_CASE("set wire fields are carried over", "[server]") {
  wire::GenerateRequest w = with_ids({1, 2, 3});
  wire::SamplingParams* p = w.mutable_sampling_params();
  p->set_temperature(0.0f);
  p->set_top_p(0.5f);
  p->set_top_k(7);
  p->set_min_p(0.1f);
  p->set_repetition_penalty(1.3f);
  p->set_presence_penalty(-0.5f);
  p->set_frequency_penalty(0.25f);
  p->set_max_tokens(4);
  p->set_min_tokens(2);
  p->add_stop("END");
  p->add_stop_token_ids(9);
  p->set_ignore_eos(true);
  p->set_seed(-1);
  (*p->mutable_logit_bias())[3] = -100.0f;
  const Result<runtime::Request> r = to_engine_request(w, limits(), nullptr);
  REQUIRE(r.ok());
  CHECK(r->sampling.temperature == 0.0f);
  CHECK(r->sampling.top_p == 0.5f);
  CHECK(r->sampling.top_k == 7);
  CHECK(r->sampling.min_p == 0.1f);
  CHECK(r->sampling.repetition_penalty == 1.3f);
  CHECK(r->sampling.presence_penalty == -0.5f);
  CHECK(r->sampling.frequency_penalty == 0.25f);
  CHECK(r->sampling.max_tokens == 4);
  CHECK(r->sampling.min_tokens == 2);
  CHECK(r->sampling.stop == std::vector<std::string>{"END"});
  CHECK(r->sampling.stop_token_ids == std::vector<int32_t>{9});
  CHECK(r->sampling.ignore_eos);
  CHECK(r->sampling.seed == uint64_t{0xffffffff});  // the int32's bits
  CHECK(r->sampling.logit_bias.at(3) == -100.0f);
}

TEST_CASE("truncate_prompt_tokens keeps the prompt's tail", "[server]") {
  wire::GenerateRequest w = with_ids({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  w.mutable_sampling_params()->set_truncate_prompt_tokens(3);
  Result<runtime::Request> r = to_engine_request(w, limits(), nullptr);
  REQUIRE(r.ok());
  CHECK(r->prompt_token_ids == std::vector<int32_t>{8, 9, 10});
  w.mutable_sampling_params()->set_truncate_prompt_tokens(-1);  // fit the context (8) - 1
  r = to_engine_request(w, limits(), nullptr);
  REQUIRE(r.ok());
  CHECK(r->prompt_token_ids.size() == 7);
  w.mutable_sampling_params()->set_truncate_prompt_tokens(-2);
  CHECK(to_engine_request(w, limits(), nullptr).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("logprobs and prompt_logprobs are carried to the engine", "[server]") {
  wire::GenerateRequest w = with_ids({1, 2});
  Result<runtime::Request> r = to_engine_request(w, limits(), nullptr);
  REQUIRE(r.ok());
  CHECK_FALSE(r->sampling.logprobs.has_value());
  CHECK_FALSE(r->sampling.prompt_logprobs.has_value());
  w.mutable_sampling_params()->set_logprobs(3);
  w.mutable_sampling_params()->set_prompt_logprobs(0);
  r = to_engine_request(w, limits(), nullptr);
  REQUIRE(r.ok());
  CHECK(r->sampling.logprobs == 3);
  CHECK(r->sampling.prompt_logprobs == 0);
}

TEST_CASE("what Tandem does not do is refused with the field's name", "[server]") {
  auto message = [](const wire::GenerateRequest& w) {
    const Result<runtime::Request> r = to_engine_request(w, limits(), nullptr);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    return r.status().message();
  };
  wire::GenerateRequest w = with_ids({1});
  w.mutable_sampling_params()->set_regex("a+");
  CHECK_THAT(message(w), Catch::Contains("regex"));
  w = with_ids({1});
  w.mutable_mm_inputs();
  CHECK_THAT(message(w), Catch::Contains("mm_inputs"));
  w = with_ids({1});
  w.set_kv_transfer_params_json("{}");
  CHECK_THAT(message(w), Catch::Contains("kv_transfer_params"));
  w = with_ids({1});
  w.set_data_parallel_rank(1);
  CHECK_THAT(message(w), Catch::Contains("data_parallel_rank"));
  w = with_ids({1});
  w.set_text("hello");  // no tokenizer given
  CHECK_THAT(message(w), Catch::Contains("tokenizer"));
  w = with_ids({0x80000000u});
  CHECK_THAT(message(w), Catch::Contains("out of range"));
  w = with_ids({1});
  w.set_request_id(std::string(300, 'x'));
  CHECK_THAT(message(w), Catch::Contains("256"));
  wire::GenerateRequest empty;
  empty.set_request_id("e");
  empty.mutable_tokenized();
  CHECK_THAT(message(empty), Catch::Contains("empty"));
}

}  // namespace
}  // namespace tandem::server
