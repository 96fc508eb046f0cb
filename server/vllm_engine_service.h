// VllmEngineService: vllm.grpc.engine.VllmEngine, the worker protocol the SMG gateway and vLLM
// clients speak (see docs/api.md). RPCs Tandem does not do are left to the generated base class,
// which answers UNIMPLEMENTED: Embed, GetTokenizer, SubscribeKvEvents, FlushCache, StartProfile,
// StopProfile.
#pragma once

#include "server/serving_context.h"
#include "vllm/grpc/engine/vllm_engine.grpc.pb.h"

namespace tandem::server {

// Stateless apart from the shared context; every method may run on any gRPC thread.
class VllmEngineService final : public vllm::grpc::engine::VllmEngine::CallbackService {
 public:
  explicit VllmEngineService(ServingContext& context) : context_(context) {}

  grpc::ServerWriteReactor<vllm::grpc::engine::GenerateResponse>* Generate(
      grpc::CallbackServerContext* call,
      const vllm::grpc::engine::GenerateRequest* request) override;
  // UNAVAILABLE while loading; healthy=false while draining or when the engine loop has work but
  // stopped advancing (wedged); healthy=true otherwise. Answers from memory.
  grpc::ServerUnaryReactor* HealthCheck(grpc::CallbackServerContext* call,
                                        const vllm::grpc::engine::HealthCheckRequest* request,
                                        vllm::grpc::engine::HealthCheckResponse* response) override;
  // Cancels every listed id that is in flight; unknown or finished ids are fine (OK).
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* call,
                                  const vllm::grpc::engine::AbortRequest* request,
                                  vllm::grpc::engine::AbortResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(
      grpc::CallbackServerContext* call, const vllm::grpc::engine::GetModelInfoRequest* request,
      vllm::grpc::engine::GetModelInfoResponse* response) override;
  grpc::ServerUnaryReactor* GetServerInfo(
      grpc::CallbackServerContext* call, const vllm::grpc::engine::GetServerInfoRequest* request,
      vllm::grpc::engine::GetServerInfoResponse* response) override;
  grpc::ServerUnaryReactor* GetLoads(grpc::CallbackServerContext* call,
                                     const vllm::grpc::engine::GetLoadsRequest* request,
                                     vllm::grpc::engine::GetLoadsResponse* response) override;

 private:
  ServingContext& context_;
};

// Most ids one Abort call may list (hardening row B9: bounded work per request).
inline constexpr int kMaxAbortIds = 4096;

}  // namespace tandem::server
