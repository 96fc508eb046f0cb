// VllmEngineService: vllm.grpc.engine.VllmEngine, the worker protocol the SMG gateway and vLLM
// clients speak (see docs/api.md). Every method is registered raw (wire_message.h): the API key is
// checked first (UNAUTHENTICATED on every method, the unimplemented ones included), then the
// request is parsed (INVALID_ARGUMENT naming what does not parse), then the method runs. The RPCs
// Tandem does not do answer UNIMPLEMENTED naming the method: Embed, GetTokenizer, StartProfile,
// StopProfile. FlushCache drops the prefix cache; SubscribeKvEvents streams its events.
#pragma once

#include <grpcpp/support/byte_buffer.h>

#include "server/serving_context.h"
#include "vllm/grpc/engine/vllm_engine.grpc.pb.h"

namespace tandem::server {

namespace vllm_wire = vllm::grpc::engine;

// Every VllmEngine method as a raw callback method (grpc::ByteBuffer in and out).
using RawVllmEngineService = vllm_wire::VllmEngine::WithRawCallbackMethod_Generate<
    vllm_wire::VllmEngine::WithRawCallbackMethod_Embed<
        vllm_wire::VllmEngine::WithRawCallbackMethod_HealthCheck<
            vllm_wire::VllmEngine::WithRawCallbackMethod_FlushCache<
                vllm_wire::VllmEngine::WithRawCallbackMethod_StartProfile<
                    vllm_wire::VllmEngine::WithRawCallbackMethod_StopProfile<
                        vllm_wire::VllmEngine::WithRawCallbackMethod_Abort<
                            vllm_wire::VllmEngine::WithRawCallbackMethod_GetModelInfo<
                                vllm_wire::VllmEngine::WithRawCallbackMethod_GetServerInfo<
                                    vllm_wire::VllmEngine::WithRawCallbackMethod_GetLoads<
                                        vllm_wire::VllmEngine::WithRawCallbackMethod_GetTokenizer<
                                            vllm_wire::VllmEngine::
                                                WithRawCallbackMethod_SubscribeKvEvents<
                                                    vllm_wire::VllmEngine::Service>>>>>>>>>>>>;

// Stateless apart from the shared context; every method may run on any gRPC thread.
class VllmEngineService final : public RawVllmEngineService {
 public:
  explicit VllmEngineService(ServingContext& context) : context_(context) {}

  // GenerateRequest -> stream of GenerateResponse (GenerateReactor).
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* call,
                                                       const grpc::ByteBuffer* request) override;
  // UNAVAILABLE while loading; healthy=false while draining or when the engine loop has work but
  // stopped advancing (wedged); healthy=true otherwise. Answers from memory.
  grpc::ServerUnaryReactor* HealthCheck(grpc::CallbackServerContext* call,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  // Cancels every listed id that is in flight; unknown or finished ids are fine (OK).
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* call,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* call,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* call,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetLoads(grpc::CallbackServerContext* call,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;

  // Not implemented by Tandem: UNAUTHENTICATED without a valid key, UNIMPLEMENTED otherwise.
  grpc::ServerUnaryReactor* Embed(grpc::CallbackServerContext* call,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* FlushCache(grpc::CallbackServerContext* call,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* StartProfile(grpc::CallbackServerContext* call,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* StopProfile(grpc::CallbackServerContext* call,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* GetTokenizer(
      grpc::CallbackServerContext* call, const grpc::ByteBuffer* request) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* SubscribeKvEvents(
      grpc::CallbackServerContext* call, const grpc::ByteBuffer* request) override;

 private:
  // The typed work of each implemented unary method, after the key check and the parse.
  grpc::Status health_check(vllm_wire::HealthCheckResponse* response) const;
  grpc::Status abort_requests(const vllm_wire::AbortRequest& request) const;
  grpc::Status model_info(vllm_wire::GetModelInfoResponse* response) const;
  grpc::Status server_info(vllm_wire::GetServerInfoResponse* response) const;
  grpc::Status loads(const vllm_wire::GetLoadsRequest& request,
                     vllm_wire::GetLoadsResponse* response) const;
  // Every cached KV block no running request holds is forgotten; success when none is left.
  grpc::Status flush_cache(smg::grpc::common::FlushCacheResponse* response) const;
  // UNAUTHENTICATED (the key check) or UNIMPLEMENTED naming `method`.
  grpc::Status unimplemented(const grpc::CallbackServerContext& call, const char* method) const;

  ServingContext& context_;
};

// Most ids one Abort call may list (hardening row B9: bounded work per request).
inline constexpr int kMaxAbortIds = 4096;

}  // namespace tandem::server
