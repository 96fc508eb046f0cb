// End-to-end tests of the VllmEngine service in process: a real gRPC server on loopback over the
// tiny model, driven through the generated client stub. Greedy outputs are checked against
// llama.cpp's reference continuation (../shared/data/tiny-moe/ref-f32.json).
#include "server/vllm_engine_service.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/create_channel.h>

#include "grpc/health/v1/health.grpc.pb.h"
#include "server/engine_config.h"
#include "server/grpc_server.h"
#include "tests/server/raw_call.h"

namespace tandem::server {
namespace {

namespace wire = vllm::grpc::engine;
using std::chrono::milliseconds;

const std::string kTinyDir = std::string(TANDEM_SHARED_DIR) + "/data/tiny-moe";

struct Reference {
  std::vector<uint32_t> prompt;
  std::string text;
  std::vector<uint32_t> greedy;
};

Reference fox_reference() {
  std::ifstream in(kTinyDir + "/ref-f32.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  for (const auto& p : ref.at("prompts")) {
    if (p.at("name") != "fox") continue;
    return {p.at("tokens").get<std::vector<uint32_t>>(), p.at("text").get<std::string>(),
            p.at("greedy_tokens").get<std::vector<uint32_t>>()};
  }
  FAIL("fox prompt missing from ref-f32.json");
  return {};
}

// The tiny model served on 127.0.0.1 (free port), the engine running unless `serve` is false.
struct Served {
  config::Config config;
  ServingContext context;
  std::unique_ptr<VllmEngineService> service;
  std::unique_ptr<GrpcServer> server;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<wire::VllmEngine::Stub> stub;
  std::shared_ptr<grpc::Channel> channel;

  // serve: load the model and start the engine; run_loop false leaves the engine loop stopped
  // (requests are accepted and queued, nothing runs) until the test calls start().
  explicit Served(config::Config c, bool serve = true, bool run_loop = true)
      : config(std::move(c)) {
    config.model.path = kTinyDir + "/tiny-moe-f32.gguf";
    config.server.host = "127.0.0.1";
    config.server.port = 0;
    config.runtime.threads = 1;
    config.model.tokenizer_dir.clear();
    context.auth = auth_policy(config.server);
    service = std::make_unique<VllmEngineService>(context);
    Result<std::unique_ptr<GrpcServer>> started = GrpcServer::start(config.server, {service.get()});
    REQUIRE(started.ok());
    server = std::move(started).value();
    channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server->port()),
                                  grpc::InsecureChannelCredentials());
    stub = wire::VllmEngine::NewStub(channel);
    if (serve) start_serving(run_loop);
  }

  void start_serving(bool run_loop = true) {
    Result<std::unique_ptr<engine::Engine>> e = engine::Engine::create(engine_options(config));
    REQUIRE(e.ok());
    engine = std::move(e).value();
    context.served = engine.get();
    context.tokenizer = engine->tokenizer();
    context.model = served_model_info(config, *engine);
    context.mapping_limits.context_length = context.model.context_length;
    if (run_loop) REQUIRE(engine->start().ok());
    context.set_state(ServingState::kServing);
    server->set_serving(true);
  }

  ~Served() {
    if (engine != nullptr) engine->stop(runtime::StopMode::kAbort);
    server->shutdown(milliseconds(1000));
  }
};

std::unique_ptr<grpc::ClientContext> client_context(const std::string& key = "") {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  if (!key.empty()) ctx->AddMetadata("authorization", "Bearer " + key);
  return ctx;
}

wire::GenerateRequest greedy_request(const std::string& id, const std::vector<uint32_t>& prompt,
                                     uint32_t max_tokens, bool stream) {
  wire::GenerateRequest r;
  r.set_request_id(id);
  r.set_stream(stream);
  for (uint32_t t : prompt) r.mutable_tokenized()->add_input_ids(t);
  r.mutable_sampling_params()->set_temperature(0.0f);
  r.mutable_sampling_params()->set_max_tokens(max_tokens);
  r.mutable_sampling_params()->set_ignore_eos(true);
  return r;
}

struct Collected {
  std::vector<uint32_t> chunk_ids;
  std::vector<wire::GenerateComplete> completes;
  int chunks = 0;
  grpc::Status status;
};

Collected run_generate(wire::VllmEngine::Stub& stub, const wire::GenerateRequest& request,
                       grpc::ClientContext* ctx = nullptr) {
  std::unique_ptr<grpc::ClientContext> own;
  if (ctx == nullptr) {
    own = client_context();
    ctx = own.get();
  }
  Collected out;
  auto reader = stub.Generate(ctx, request);
  wire::GenerateResponse response;
  while (reader->Read(&response)) {
    if (response.has_chunk()) {
      ++out.chunks;
      for (uint32_t t : response.chunk().token_ids()) out.chunk_ids.push_back(t);
    } else if (response.has_complete()) {
      out.completes.push_back(response.complete());
    }
  }
  out.status = reader->Finish();
  return out;
}

std::vector<uint32_t> ids_of(const wire::GenerateComplete& c) {
  return std::vector<uint32_t>(c.output_ids().begin(), c.output_ids().end());
}

TEST_CASE("HealthCheck is UNAVAILABLE while loading, healthy once serving", "[server][grpc]") {
  Served s(config::Config{}, /*serve=*/false);
  wire::HealthCheckResponse health;
  auto ctx = client_context();
  grpc::Status status = s.stub->HealthCheck(ctx.get(), wire::HealthCheckRequest(), &health);
  CHECK(status.error_code() == grpc::StatusCode::UNAVAILABLE);

  auto health_stub = grpc::health::v1::Health::NewStub(s.channel);
  grpc::health::v1::HealthCheckResponse std_health;
  ctx = client_context();
  REQUIRE(health_stub->Check(ctx.get(), grpc::health::v1::HealthCheckRequest(), &std_health).ok());
  CHECK(std_health.status() == grpc::health::v1::HealthCheckResponse::NOT_SERVING);

  s.start_serving();
  ctx = client_context();
  REQUIRE(s.stub->HealthCheck(ctx.get(), wire::HealthCheckRequest(), &health).ok());
  CHECK(health.healthy());
  ctx = client_context();
  grpc::health::v1::HealthCheckRequest named;
  named.set_service("vllm.grpc.engine.VllmEngine");
  REQUIRE(health_stub->Check(ctx.get(), named, &std_health).ok());
  CHECK(std_health.status() == grpc::health::v1::HealthCheckResponse::SERVING);

  s.context.set_state(ServingState::kDraining);
  ctx = client_context();
  REQUIRE(s.stub->HealthCheck(ctx.get(), wire::HealthCheckRequest(), &health).ok());
  CHECK_FALSE(health.healthy());
}

TEST_CASE("GetModelInfo, GetServerInfo and GetLoads describe the served model", "[server][grpc]") {
  Served s(config::Config{});
  wire::GetModelInfoResponse info;
  auto ctx = client_context();
  REQUIRE(s.stub->GetModelInfo(ctx.get(), wire::GetModelInfoRequest(), &info).ok());
  CHECK(info.is_generation());
  CHECK(info.served_model_name() == "tiny-moe-f32");
  CHECK(info.vocab_size() == 2051);
  CHECK(info.max_context_length() == 256);
  CHECK(info.max_req_input_len() == 255);
  CHECK(info.model_type() == "qwen3_moe");
  REQUIRE(info.eos_token_ids_size() >= 1);
  CHECK(info.eos_token_ids(0) == 2048);
  // The GGUF's tokenizer was exported for the gateway next to the model or under $TMPDIR.
  REQUIRE_FALSE(info.tokenizer_path().empty());
  CHECK(std::ifstream(info.tokenizer_path() + "/tokenizer.json").good());
  CHECK(std::ifstream(info.tokenizer_path() + "/tokenizer_config.json").good());

  wire::GetServerInfoResponse server_info;
  ctx = client_context();
  REQUIRE(s.stub->GetServerInfo(ctx.get(), wire::GetServerInfoRequest(), &server_info).ok());
  CHECK(server_info.active_requests() == 0);
  CHECK_FALSE(server_info.is_paused());
  CHECK(server_info.data_parallel_size() == 1);

  wire::GetLoadsResponse loads;
  ctx = client_context();
  REQUIRE(s.stub->GetLoads(ctx.get(), wire::GetLoadsRequest(), &loads).ok());
  CHECK(loads.dp_rank_count() == 1);
  REQUIRE(loads.loads_size() == 1);
  CHECK(loads.loads(0).max_total_num_tokens() > 0);
  CHECK(loads.loads(0).token_usage() == 0.0);

  // What Tandem does not do answers UNIMPLEMENTED.
  wire::EmbedResponse embed;
  ctx = client_context();
  CHECK(s.stub->Embed(ctx.get(), wire::EmbedRequest(), &embed).error_code() ==
        grpc::StatusCode::UNIMPLEMENTED);
}

TEST_CASE("Generate reproduces llama.cpp's greedy tokens, streaming and not", "[server][grpc]") {
  Served s(config::Config{});
  const Reference ref = fox_reference();

  const Collected whole = run_generate(*s.stub, greedy_request("whole", ref.prompt, 16, false));
  INFO(whole.status.error_message());
  REQUIRE(whole.status.ok());
  CHECK(whole.chunks == 0);
  REQUIRE(whole.completes.size() == 1);
  CHECK(ids_of(whole.completes[0]) == ref.greedy);
  CHECK(whole.completes[0].finish_reason() == "length");
  CHECK(whole.completes[0].prompt_tokens() == ref.prompt.size());
  CHECK(whole.completes[0].completion_tokens() == 16);

  const Collected streamed =
      run_generate(*s.stub, greedy_request("streamed", ref.prompt, 16, true));
  REQUIRE(streamed.status.ok());
  CHECK(streamed.chunk_ids == ref.greedy);  // chunks carry only new ids
  CHECK(streamed.chunks >= 1);
  REQUIRE(streamed.completes.size() == 1);
  CHECK(streamed.completes[0].finish_reason() == "length");
  CHECK(ids_of(streamed.completes[0]) == ref.greedy);

  // Text input goes through the model's tokenizer (llama.cpp tokenized the same text).
  wire::GenerateRequest text = greedy_request("text", {}, 16, false);
  text.set_text(ref.text);
  const Collected from_text = run_generate(*s.stub, text);
  REQUIRE(from_text.status.ok());
  REQUIRE(from_text.completes.size() == 1);
  CHECK(from_text.completes[0].prompt_tokens() == ref.prompt.size());
  CHECK(ids_of(from_text.completes[0]) == ref.greedy);
}

TEST_CASE("Generate stops on stop token ids and reports the match", "[server][grpc]") {
  Served s(config::Config{});
  const Reference ref = fox_reference();
  wire::GenerateRequest r = greedy_request("stop-id", ref.prompt, 16, false);
  r.mutable_sampling_params()->add_stop_token_ids(ref.greedy[3]);
  const Collected got = run_generate(*s.stub, r);
  REQUIRE(got.status.ok());
  REQUIRE(got.completes.size() == 1);
  CHECK(got.completes[0].finish_reason() == "stop");
  CHECK(got.completes[0].matched_token_id() == ref.greedy[3]);
  CHECK(ids_of(got.completes[0]) ==
        std::vector<uint32_t>(ref.greedy.begin(), ref.greedy.begin() + 4));
}

TEST_CASE("bad Generate requests get INVALID_ARGUMENT naming the problem", "[server][grpc]") {
  Served s(config::Config{});
  const Reference ref = fox_reference();
  auto expect_invalid = [&](wire::GenerateRequest r, const std::string& needle) {
    const Collected got = run_generate(*s.stub, r);
    INFO(got.status.error_message());
    CHECK(got.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(got.status.error_message().find(needle) != std::string::npos);
  };
  wire::GenerateRequest r = greedy_request("bad", ref.prompt, 8, false);
  r.mutable_sampling_params()->set_top_p(1.5f);
  expect_invalid(r, "top_p");
  r = greedy_request("bad", ref.prompt, 8, false);
  r.mutable_sampling_params()->set_logprobs(21);  // at most 20 alternatives
  expect_invalid(r, "logprobs must be in [0, 20], got 21");
  r = greedy_request("bad", ref.prompt, 8, false);
  r.mutable_sampling_params()->set_prompt_logprobs(-1);  // -1 (every token) is refused
  expect_invalid(r, "prompt_logprobs must be in [0, 20], got -1");
  r = greedy_request("bad", ref.prompt, 8, false);
  r.mutable_sampling_params()->set_json_schema("{}");
  expect_invalid(r, "json_schema");
  r = greedy_request("bad", ref.prompt, 8, false);
  r.mutable_sampling_params()->set_n(1000);
  expect_invalid(r, "n = 1000");
  expect_invalid(greedy_request("bad", {}, 8, false), "no input");
  expect_invalid(greedy_request("bad", {1, 2, 5000}, 8, false), "5000");
  expect_invalid(greedy_request("bad", std::vector<uint32_t>(250, 7), 100, false), "256");
  expect_invalid(greedy_request("", ref.prompt, 8, false), "request_id");

  // The server still serves afterwards.
  const Collected ok = run_generate(*s.stub, greedy_request("after", ref.prompt, 4, false));
  CHECK(ok.status.ok());
}

TEST_CASE("Abort and client cancellation end a running request", "[server][grpc]") {
  Served s(config::Config{});
  const Reference ref = fox_reference();

  SECTION("Abort ends the stream with finish_reason abort") {
    auto ctx = client_context();
    auto reader = s.stub->Generate(ctx.get(), greedy_request("long", ref.prompt, 230, true));
    wire::GenerateResponse response;
    REQUIRE(reader->Read(&response));
    REQUIRE(response.has_chunk());
    wire::AbortRequest abort;
    abort.add_request_ids("long");
    abort.add_request_ids("unknown-id-is-fine");
    wire::AbortResponse abort_response;
    auto abort_ctx = client_context();
    REQUIRE(s.stub->Abort(abort_ctx.get(), abort, &abort_response).ok());
    std::string finish;
    uint32_t completion = 0;
    while (reader->Read(&response)) {
      if (response.has_complete()) {
        finish = response.complete().finish_reason();
        completion = response.complete().completion_tokens();
      }
    }
    CHECK(reader->Finish().ok());
    CHECK(finish == "abort");
    CHECK(completion < 230);
  }

  SECTION("a client that cancels frees its sequence; a duplicate id is refused meanwhile") {
    auto ctx = client_context();
    auto reader = s.stub->Generate(ctx.get(), greedy_request("gone", ref.prompt, 230, true));
    wire::GenerateResponse response;
    REQUIRE(reader->Read(&response));
    const Collected dup = run_generate(*s.stub, greedy_request("gone", ref.prompt, 4, false));
    CHECK(dup.status.error_code() == grpc::StatusCode::ALREADY_EXISTS);
    ctx->TryCancel();
    CHECK(reader->Finish().error_code() == grpc::StatusCode::CANCELLED);
    // The engine lets it go within a step; wait for it rather than for a fixed time.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (s.engine->in_flight() > 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    CHECK(s.engine->in_flight() == 0);
    const Collected again = run_generate(*s.stub, greedy_request("gone", ref.prompt, 4, false));
    CHECK(again.status.ok());
  }
}

TEST_CASE("more requests than the queue holds: the excess fails fast, the rest complete",
          "[server][grpc]") {
  config::Config c;
  // server.max_queued_requests counts the requests waiting beyond a full batch: 8 may run and 4
  // wait, so 12 are accepted.
  c.server.max_running_requests = 8;
  c.server.max_queued_requests = 4;
  // The engine loop is held, so the queue fills deterministically.
  Served s(c, /*serve=*/true, /*run_loop=*/false);
  const Reference ref = fox_reference();
  std::vector<Collected> admitted(12);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < admitted.size(); ++i) {
    threads.emplace_back([&, i] {
      admitted[i] =
          run_generate(*s.stub, greedy_request("q" + std::to_string(i), ref.prompt, 40, false));
    });
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (s.engine->in_flight() < admitted.size() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  REQUIRE(s.engine->in_flight() == admitted.size());
  for (int i = 0; i < 6; ++i) {
    const Collected excess =
        run_generate(*s.stub, greedy_request("x" + std::to_string(i), ref.prompt, 40, false));
    CHECK(excess.status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
    CHECK(excess.status.error_message().find("queue full") != std::string::npos);
  }
  REQUIRE(s.engine->start().ok());
  for (auto& t : threads) t.join();
  for (const Collected& r : admitted) {
    REQUIRE(r.status.ok());
    REQUIRE(r.completes.size() == 1);
    CHECK(ids_of(r.completes[0]).size() == 40);
    CHECK(std::vector<uint32_t>(r.completes[0].output_ids().begin(),
                                r.completes[0].output_ids().begin() + 16) == ref.greedy);
  }
}

TEST_CASE("API keys are required on every VllmEngine call when configured", "[server][grpc]") {
  config::Config c;
  c.server.api_keys = {"secret-key-1"};
  Served s(c);
  wire::GetModelInfoResponse info;
  auto ctx = client_context();
  CHECK(s.stub->GetModelInfo(ctx.get(), wire::GetModelInfoRequest(), &info).error_code() ==
        grpc::StatusCode::UNAUTHENTICATED);
  ctx = client_context("wrong-key-1");
  CHECK(s.stub->GetModelInfo(ctx.get(), wire::GetModelInfoRequest(), &info).error_code() ==
        grpc::StatusCode::UNAUTHENTICATED);
  const Collected denied = run_generate(*s.stub, greedy_request("x", {1, 2}, 2, false));
  CHECK(denied.status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  ctx = client_context("secret-key-1");
  CHECK(s.stub->GetModelInfo(ctx.get(), wire::GetModelInfoRequest(), &info).ok());
}

TEST_CASE("calls from a trusted peer need no API key, others still do", "[server][grpc]") {
  config::Config c;
  c.server.api_keys = {"secret-key-1"};
  c.server.trusted_peers = {"127.0.0.0/8"};
  Served trusted(c);
  wire::GetModelInfoResponse info;
  auto ctx = client_context();
  CHECK(trusted.stub->GetModelInfo(ctx.get(), wire::GetModelInfoRequest(), &info).ok());
  CHECK(run_generate(*trusted.stub, greedy_request("t", {1, 2}, 2, false)).status.ok());
  // A wrong key from a trusted peer is still accepted: the peer, not the header, decides.
  ctx = client_context("wrong-key-1");
  CHECK(trusted.stub->GetModelInfo(ctx.get(), wire::GetModelInfoRequest(), &info).ok());

  c.server.trusted_peers = {"10.0.0.0/8", "::2"};
  Served other(c);
  ctx = client_context();
  CHECK(other.stub->GetModelInfo(ctx.get(), wire::GetModelInfoRequest(), &info).error_code() ==
        grpc::StatusCode::UNAUTHENTICATED);
  ctx = client_context("secret-key-1");
  CHECK(other.stub->GetModelInfo(ctx.get(), wire::GetModelInfoRequest(), &info).ok());
}

TEST_CASE("gRPC peer strings give their IP address", "[server]") {
  const auto is = [](std::string_view peer, std::string_view address) {
    const std::optional<config::IpAddress> got = grpc_peer_address(peer);
    return got.has_value() && got->bytes == config::parse_ip_address(address)->bytes;
  };
  CHECK(is("ipv4:127.0.0.1:43210", "127.0.0.1"));
  CHECK(is("ipv6:[::1]:43210", "::1"));
  CHECK(is("ipv6:%5B::ffff:10.1.2.3%5D:80", "10.1.2.3"));
  CHECK(is("ipv6:%5B%3A%3A1%5D:80", "::1"));
  CHECK_FALSE(grpc_peer_address("unix:/run/tandemd.sock").has_value());
  CHECK_FALSE(grpc_peer_address("ipv4:not-an-address:1").has_value());
  CHECK_FALSE(grpc_peer_address("ipv6:[::1:80").has_value());
  CHECK_FALSE(grpc_peer_address("").has_value());
}

TEST_CASE("the methods Tandem does not implement check the API key first", "[server][grpc]") {
  config::Config c;
  c.server.api_keys = {"secret-key-1"};
  Served s(c, /*serve=*/false);
  const std::vector<std::string> methods = {"Embed", "StartProfile", "StopProfile", "GetTokenizer"};
  for (const std::string& m : methods) {
    INFO(m);
    const std::string method = "/vllm.grpc.engine.VllmEngine/" + m;
    CHECK(raw_unary_call(s.channel, method, "").status.error_code() ==
          grpc::StatusCode::UNAUTHENTICATED);
    CHECK(raw_unary_call(s.channel, method, "", "wrong-key-1").status.error_code() ==
          grpc::StatusCode::UNAUTHENTICATED);
    // The body is never looked at before the key: garbage is still UNAUTHENTICATED.
    CHECK(raw_unary_call(s.channel, method, std::string("\xFF\xFF", 2)).status.error_code() ==
          grpc::StatusCode::UNAUTHENTICATED);
    const RawReply with_key = raw_unary_call(s.channel, method, "", "secret-key-1");
    CHECK(with_key.status.error_code() == grpc::StatusCode::UNIMPLEMENTED);
    CHECK_THAT(with_key.status.error_message(), Catch::Contains(m + " is not implemented"));
  }
  // Without keys configured they are UNIMPLEMENTED, naming the method.
  Served open(config::Config{}, /*serve=*/false);
  const RawReply embed = raw_unary_call(open.channel, "/vllm.grpc.engine.VllmEngine/Embed", "");
  CHECK(embed.status.error_code() == grpc::StatusCode::UNIMPLEMENTED);
  CHECK_THAT(embed.status.error_message(), Catch::Contains("Embed"));
}

TEST_CASE("FlushCache checks the key, waits for the model, and drops the prefix cache",
          "[server][grpc]") {
  config::Config c;
  c.server.api_keys = {"secret-key-1"};
  const std::string method = "/vllm.grpc.engine.VllmEngine/FlushCache";
  Served loading(c, /*serve=*/false);
  CHECK(raw_unary_call(loading.channel, method, "").status.error_code() ==
        grpc::StatusCode::UNAUTHENTICATED);
  CHECK(raw_unary_call(loading.channel, method, "", "secret-key-1").status.error_code() ==
        grpc::StatusCode::UNAVAILABLE);
  Served s(c);
  const RawReply reply = raw_unary_call(s.channel, method, "", "secret-key-1");
  REQUIRE(reply.status.ok());
  smg::grpc::common::FlushCacheResponse response;
  REQUIRE(response.ParseFromString(reply.bytes));
  CHECK(response.success());
  CHECK_THAT(response.message(), Catch::Contains("dropped 0 cached KV blocks"));
}

TEST_CASE("requests that do not parse get INVALID_ARGUMENT naming the problem", "[server][grpc]") {
  config::Config c;
  c.server.api_keys = {"secret-key-1"};
  Served s(c);
  const Reference ref = fox_reference();
  // A Generate request whose request_id holds an invalid UTF-8 byte.
  std::string generate = greedy_request("id-QQ", ref.prompt, 4, false).SerializeAsString();
  generate.replace(generate.find("QQ"), 2, "\xC3\x28");
  const RawReply bad_utf8 =
      raw_unary_call(s.channel, "/vllm.grpc.engine.VllmEngine/Generate", generate, "secret-key-1");
  CHECK(bad_utf8.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(bad_utf8.status.error_message(),
             Catch::Contains("vllm.grpc.engine.GenerateRequest") &&
                 Catch::Contains("field 'request_id' is not valid UTF-8"));
  // The key still comes first.
  CHECK(raw_unary_call(s.channel, "/vllm.grpc.engine.VllmEngine/Generate", generate)
            .status.error_code() == grpc::StatusCode::UNAUTHENTICATED);

  // Bytes that are not protobuf at all, on every unary method.
  const std::string garbage("\x0A\x64xy", 4);
  for (const char* m : {"HealthCheck", "Abort", "GetModelInfo", "GetServerInfo", "GetLoads"}) {
    INFO(m);
    const RawReply r = raw_unary_call(s.channel, std::string("/vllm.grpc.engine.VllmEngine/") + m,
                                      garbage, "secret-key-1");
    CHECK(r.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(r.status.error_message(), Catch::Contains("malformed protobuf at byte 0"));
  }
  // The server keeps serving: a valid request after the bad ones.
  auto ctx = client_context("secret-key-1");
  const Collected ok =
      run_generate(*s.stub, greedy_request("after", ref.prompt, 4, false), ctx.get());
  CHECK(ok.status.ok());
  // A valid message sent raw is answered as through the stub.
  const RawReply health =
      raw_unary_call(s.channel, "/vllm.grpc.engine.VllmEngine/HealthCheck",
                     wire::HealthCheckRequest().SerializeAsString(), "secret-key-1");
  REQUIRE(health.status.ok());
  wire::HealthCheckResponse h;
  REQUIRE(h.ParseFromString(health.bytes));
  CHECK(h.healthy());
}

}  // namespace
}  // namespace tandem::server
