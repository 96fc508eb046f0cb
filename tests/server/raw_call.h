// Test helper: one unary gRPC call with hand-made request bytes (grpc::GenericStub), for requests
// a generated stub cannot send (bytes that do not parse, strings that are not UTF-8).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

namespace tandem::server {

struct RawReply {
  grpc::Status status;
  std::string bytes;  // the reply message when the status is OK
};

// Calls `method` ("/package.Service/Method") with `request` as the message bytes, and the
// `authorization: Bearer <key>` metadata when `key` is not empty. A server-streaming method may
// be called too when it answers with a status only (an error).
inline RawReply raw_unary_call(const std::shared_ptr<grpc::Channel>& channel,
                               const std::string& method, const std::string& request,
                               const std::string& key = "") {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (!key.empty()) ctx.AddMetadata("authorization", "Bearer " + key);
  grpc::Slice slice(request);
  const grpc::ByteBuffer in(&slice, 1);
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&ctx, method, in, &cq);
  call->StartCall();
  grpc::ByteBuffer out;
  RawReply reply;
  call->Finish(&out, &reply.status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  if (reply.status.ok()) {
    grpc::Slice all;
    if (out.Valid() && out.DumpToSingleSlice(&all).ok()) {
      reply.bytes.assign(reinterpret_cast<const char*>(all.begin()), all.size());
    }
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return reply;
}

}  // namespace tandem::server
