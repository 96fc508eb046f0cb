// VllmEngine RPCs: health, abort, model/server info, loads, the unimplemented ones; Generate goes
// to GenerateReactor.
#include "server/vllm_engine_service.h"

#include <algorithm>
#include <ctime>
#include <limits>
#include <string>

#include <spdlog/spdlog.h>

#include "server/api_key_auth.h"
#include "server/generate_reactor.h"
#include "server/kv_events_reactor.h"
#include "server/wire_message.h"
#include "tandem/build_info.h"

namespace tandem::server {
namespace {

namespace wire = vllm::grpc::engine;

grpc::ServerUnaryReactor* finish_with(grpc::CallbackServerContext* call, grpc::Status status) {
  grpc::ServerUnaryReactor* reactor = call->DefaultReactor();
  reactor->Finish(std::move(status));
  return reactor;
}

// How long FlushCache waits for the engine loop to get to the drop (one forward pass at most).
constexpr auto kFlushWait = std::chrono::seconds(30);

grpc::Status loading_status() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "the model is still loading; retry when HealthCheck passes");
}

// "2026-11-29T12:00:00Z"
std::string iso8601_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* VllmEngineService::Generate(
    grpc::CallbackServerContext* call, const grpc::ByteBuffer* request) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  context_.last_receive_unix_seconds.store(now, std::memory_order_relaxed);
  return new GenerateReactor(context_, call, *request);
}

grpc::ServerUnaryReactor* VllmEngineService::HealthCheck(grpc::CallbackServerContext* call,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  return serve_unary<wire::HealthCheckRequest, wire::HealthCheckResponse>(
      call, check_api_key(context_.auth, *call), *request, response,
      [this](const wire::HealthCheckRequest&, wire::HealthCheckResponse* out) {
        return health_check(out);
      });
}

grpc::ServerUnaryReactor* VllmEngineService::Abort(grpc::CallbackServerContext* call,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) {
  return serve_unary<wire::AbortRequest, wire::AbortResponse>(
      call, check_api_key(context_.auth, *call), *request, response,
      [this](const wire::AbortRequest& in, wire::AbortResponse*) { return abort_requests(in); });
}

grpc::ServerUnaryReactor* VllmEngineService::GetModelInfo(grpc::CallbackServerContext* call,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  return serve_unary<wire::GetModelInfoRequest, wire::GetModelInfoResponse>(
      call, check_api_key(context_.auth, *call), *request, response,
      [this](const wire::GetModelInfoRequest&, wire::GetModelInfoResponse* out) {
        return model_info(out);
      });
}

grpc::ServerUnaryReactor* VllmEngineService::GetServerInfo(grpc::CallbackServerContext* call,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return serve_unary<wire::GetServerInfoRequest, wire::GetServerInfoResponse>(
      call, check_api_key(context_.auth, *call), *request, response,
      [this](const wire::GetServerInfoRequest&, wire::GetServerInfoResponse* out) {
        return server_info(out);
      });
}

grpc::ServerUnaryReactor* VllmEngineService::GetLoads(grpc::CallbackServerContext* call,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  return serve_unary<wire::GetLoadsRequest, wire::GetLoadsResponse>(
      call, check_api_key(context_.auth, *call), *request, response,
      [this](const wire::GetLoadsRequest& in, wire::GetLoadsResponse* out) {
        return loads(in, out);
      });
}

grpc::Status VllmEngineService::unimplemented(const grpc::CallbackServerContext& call,
                                              const char* method) const {
  grpc::Status auth = check_api_key(context_.auth, call);
  if (!auth.ok()) return auth;
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      std::string("VllmEngine/") + method + " is not implemented by Tandem");
}

// The unimplemented methods never read their request: a body that does not parse changes
// nothing about the answer.
grpc::ServerUnaryReactor* VllmEngineService::Embed(grpc::CallbackServerContext* call,
                                                   const grpc::ByteBuffer*, grpc::ByteBuffer*) {
  return finish_with(call, unimplemented(*call, "Embed"));
}

grpc::ServerUnaryReactor* VllmEngineService::FlushCache(grpc::CallbackServerContext* call,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return serve_unary<smg::grpc::common::FlushCacheRequest, smg::grpc::common::FlushCacheResponse>(
      call, check_api_key(context_.auth, *call), *request, response,
      [this](const smg::grpc::common::FlushCacheRequest&,
             smg::grpc::common::FlushCacheResponse* out) { return flush_cache(out); });
}

grpc::Status VllmEngineService::flush_cache(smg::grpc::common::FlushCacheResponse* response) const {
  engine::Engine* engine = context_.engine();
  if (engine == nullptr) return loading_status();
  // The drop itself never waits for requests to end: blocks running requests hold stay cached
  // (success is false then, and the message says how many). timeout_s is not needed for that.
  Result<runtime::PrefixCacheDrop> dropped = engine->drop_prefix_cache(kFlushWait);
  if (!dropped.ok()) {
    response->set_success(false);
    response->set_message(dropped.status().message());
    return grpc::Status::OK;
  }
  response->set_success(dropped->held_blocks == 0);
  response->set_message("dropped " + std::to_string(dropped->dropped_blocks) +
                        " cached KV blocks; " + std::to_string(dropped->held_blocks) +
                        " held by running requests stay cached");
  spdlog::info("FlushCache: {}", response->message());
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* VllmEngineService::StartProfile(grpc::CallbackServerContext* call,
                                                          const grpc::ByteBuffer*,
                                                          grpc::ByteBuffer*) {
  return finish_with(call, unimplemented(*call, "StartProfile"));
}

grpc::ServerUnaryReactor* VllmEngineService::StopProfile(grpc::CallbackServerContext* call,
                                                         const grpc::ByteBuffer*,
                                                         grpc::ByteBuffer*) {
  return finish_with(call, unimplemented(*call, "StopProfile"));
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* VllmEngineService::GetTokenizer(
    grpc::CallbackServerContext* call, const grpc::ByteBuffer*) {
  return new FinishedWriteReactor(unimplemented(*call, "GetTokenizer"));
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* VllmEngineService::SubscribeKvEvents(
    grpc::CallbackServerContext* call, const grpc::ByteBuffer* request) {
  return new KvEventsReactor(context_, call, *request);
}

grpc::Status VllmEngineService::health_check(wire::HealthCheckResponse* response) const {
  const engine::Engine* engine = context_.engine();
  if (engine == nullptr) return loading_status();
  if (context_.current_state() == ServingState::kDraining) {
    response->set_healthy(false);
    response->set_message("draining: the server is shutting down");
    return grpc::Status::OK;
  }
  if (const Status failure = engine->failure(); !failure.ok()) {
    response->set_healthy(false);
    response->set_message("not serving: " + failure.message());
    return grpc::Status::OK;
  }
  const runtime::SchedulerLoad load = engine->load();
  const auto silent = runtime::Clock::now() - load.heartbeat;
  if (silent > context_.wedged_after) {
    response->set_healthy(false);
    response->set_message(
        "the engine loop has not advanced for " +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(silent).count()) + " s");
    return grpc::Status::OK;
  }
  response->set_healthy(true);
  response->set_message("Health");
  return grpc::Status::OK;
}

grpc::Status VllmEngineService::abort_requests(const wire::AbortRequest& request) const {
  engine::Engine* engine = context_.engine();
  if (engine == nullptr) return loading_status();
  if (request.request_ids_size() > kMaxAbortIds) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "request_ids lists " + std::to_string(request.request_ids_size()) +
                            " ids; the limit is " + std::to_string(kMaxAbortIds));
  }
  int found = 0;
  for (const std::string& id : request.request_ids()) found += engine->cancel(id) ? 1 : 0;
  spdlog::info("abort: {} request id(s) asked, {} in flight cancelled", request.request_ids_size(),
               found);
  return grpc::Status::OK;
}

grpc::Status VllmEngineService::model_info(wire::GetModelInfoResponse* response) const {
  if (context_.engine() == nullptr) return loading_status();
  const ServedModelInfo& m = context_.model;
  response->set_model_path(m.model_path);
  response->set_is_generation(true);
  response->set_max_context_length(static_cast<uint32_t>(m.context_length));
  response->set_vocab_size(static_cast<uint32_t>(m.vocab_size));
  response->set_supports_vision(false);
  response->set_served_model_name(m.served_model_name);
  response->set_tokenizer_path(m.tokenizer_path);
  response->set_model_type(m.model_type);
  for (const std::string& a : m.architectures) response->add_architectures(a);
  for (const int32_t id : m.eos_token_ids) response->add_eos_token_ids(id);
  response->set_pad_token_id(m.pad_token_id);
  response->set_bos_token_id(m.bos_token_id);
  // The longest prompt that still leaves room for one generated token.
  response->set_max_req_input_len(static_cast<int32_t>(m.context_length - 1));
  return grpc::Status::OK;
}

grpc::Status VllmEngineService::server_info(wire::GetServerInfoResponse* response) const {
  const engine::Engine* engine = context_.engine();
  if (engine == nullptr) return loading_status();
  response->set_active_requests(static_cast<uint32_t>(engine->in_flight()));
  response->set_is_paused(context_.current_state() == ServingState::kDraining);
  response->set_last_receive_timestamp(
      context_.last_receive_unix_seconds.load(std::memory_order_relaxed));
  response->set_uptime_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - context_.started_at)
          .count());
  response->set_server_type("tandem-grpc");
  response->set_data_parallel_size(1);
  return grpc::Status::OK;
}

grpc::Status VllmEngineService::loads(const wire::GetLoadsRequest& request,
                                      wire::GetLoadsResponse* response) const {
  const engine::Engine* engine = context_.engine();
  if (engine == nullptr) return loading_status();
  if (request.has_dp_rank() && request.dp_rank() != 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "dp_rank " + std::to_string(request.dp_rank()) +
                            " does not exist; this server has one rank, 0");
  }
  const runtime::SchedulerLoad load = engine->load();
  response->set_timestamp(iso8601_now());
  response->set_version(build_info::kVersion);
  response->set_dp_rank_count(1);
  wire::SchedulerLoad* l = response->add_loads();
  l->set_dp_rank(0);
  l->set_num_running_reqs(static_cast<int32_t>(load.running));
  l->set_num_waiting_reqs(static_cast<int32_t>(load.waiting));
  l->set_num_total_reqs(static_cast<int32_t>(load.running + load.waiting));
  l->set_num_used_tokens(static_cast<int32_t>(load.kv_used_blocks * load.kv_block_tokens));
  l->set_max_total_num_tokens(static_cast<int32_t>(load.kv_total_blocks * load.kv_block_tokens));
  l->set_token_usage(load.kv_total_blocks > 0 ? static_cast<double>(load.kv_used_blocks) /
                                                    static_cast<double>(load.kv_total_blocks)
                                              : 0.0);
  l->set_max_running_requests(static_cast<int32_t>(context_.served->limits().max_running));
  l->set_cache_hit_rate(load.prefix_query_tokens > 0
                            ? static_cast<double>(load.prefix_hit_tokens) /
                                  static_cast<double>(load.prefix_query_tokens)
                            : 0.0);
  l->set_num_waiting_uncached_tokens(static_cast<int32_t>(
      std::min<int64_t>(load.waiting_uncached_tokens, std::numeric_limits<int32_t>::max())));
  return grpc::Status::OK;
}

}  // namespace tandem::server
