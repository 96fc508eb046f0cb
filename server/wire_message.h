// Wire messages of tandemd's services, parsed and serialized by tandemd itself: every method is
// registered raw (grpc::ByteBuffer in and out), so that a request that does not parse gets
// INVALID_ARGUMENT naming the problem instead of the empty UNIMPLEMENTED the generated typed
// handlers answer when deserialization fails.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

namespace tandem::server {

// Parses `bytes` into `out` (cleared first). OK, or INVALID_ARGUMENT naming the message type and
// what is wrong (describe_wire_problem). Any thread.
grpc::Status parse_wire_message(const grpc::ByteBuffer& bytes, google::protobuf::Message& out);

// Serializes `message` into `out`. INTERNAL when protobuf cannot (a bug). Any thread.
grpc::Status serialize_wire_message(const google::protobuf::Message& message,
                                    grpc::ByteBuffer* out);

// Why `bytes`, which protobuf refused to parse as `type`, is not a valid message: the first string
// field (by its path, e.g. "sampling_params.stop[1]") holding invalid UTF-8 with the offset of
// the bad byte, or the byte offset where the wire data is malformed (truncated, bad tag, bad wire
// type, nesting deeper than protobuf's limit of 100). A generic sentence when neither is found.
// Reads only `bytes`, never past them. Pure.
std::string describe_wire_problem(std::string_view bytes, const google::protobuf::Descriptor& type);

// A unary RPC on raw messages: `auth` (the API-key check's result) first, so that a caller
// without a key learns nothing about the body; then the request is parsed; then
// `work(const Request&, Response*)` returns the call's status, the response being sent when it
// is OK. Finishes the call on the calling (gRPC) thread.
template <class Request, class Response, class Work>
grpc::ServerUnaryReactor* serve_unary(grpc::CallbackServerContext* call, grpc::Status auth,
                                      const grpc::ByteBuffer& in, grpc::ByteBuffer* out,
                                      Work&& work) {
  grpc::Status status = std::move(auth);
  if (status.ok()) {
    Request request;
    status = parse_wire_message(in, request);
    if (status.ok()) {
      Response response;
      status = std::forward<Work>(work)(request, &response);
      if (status.ok()) status = serialize_wire_message(response, out);
    }
  }
  grpc::ServerUnaryReactor* reactor = call->DefaultReactor();
  reactor->Finish(std::move(status));
  return reactor;
}

// A server-streaming call that ends at once with `status` and no message (refused calls and the
// methods Tandem does not implement). Deletes itself when gRPC is done with it.
class FinishedWriteReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit FinishedWriteReactor(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace tandem::server
