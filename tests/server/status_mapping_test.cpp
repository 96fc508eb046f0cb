// Tests of the Status -> gRPC mapping: every code maps to the gRPC code of the same name.
#include "server/status_mapping.h"

#include <catch2/catch.hpp>

namespace tandem::server {
namespace {

TEST_CASE("every StatusCode maps to the gRPC code of the same meaning", "[server]") {
  const std::pair<StatusCode, grpc::StatusCode> pairs[] = {
      {StatusCode::kCancelled, grpc::StatusCode::CANCELLED},
      {StatusCode::kUnknown, grpc::StatusCode::UNKNOWN},
      {StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
      {StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
      {StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
      {StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
      {StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED},
      {StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED},
      {StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION},
      {StatusCode::kAborted, grpc::StatusCode::ABORTED},
      {StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE},
      {StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
      {StatusCode::kInternal, grpc::StatusCode::INTERNAL},
      {StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
      {StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS},
      {StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED},
  };
  for (const auto& [code, grpc_code] : pairs) {
    INFO(status_code_name(code));
    const grpc::Status g = to_grpc_status(Status(code, "why"));
    CHECK(g.error_code() == grpc_code);
    CHECK(g.error_message() == "why");
  }
  CHECK(to_grpc_status(Status()).ok());
}

}  // namespace
}  // namespace tandem::server
