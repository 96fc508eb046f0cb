// Status -> grpc::Status.
#include "server/status_mapping.h"

namespace tandem::server {

namespace {
// The engine's StatusCode is numbered after gRPC's; a mismatch here is a build error.
static_assert(static_cast<int>(StatusCode::kCancelled) == grpc::StatusCode::CANCELLED);
static_assert(static_cast<int>(StatusCode::kInvalidArgument) == grpc::StatusCode::INVALID_ARGUMENT);
static_assert(static_cast<int>(StatusCode::kResourceExhausted) ==
              grpc::StatusCode::RESOURCE_EXHAUSTED);
static_assert(static_cast<int>(StatusCode::kUnavailable) == grpc::StatusCode::UNAVAILABLE);
static_assert(static_cast<int>(StatusCode::kUnauthenticated) == grpc::StatusCode::UNAUTHENTICATED);
}  // namespace

grpc::Status to_grpc_status(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const int code = static_cast<int>(status.code());
  if (code <= 0 || code >= kStatusCodeCount) {
    return grpc::Status(grpc::StatusCode::UNKNOWN, status.message());
  }
  return grpc::Status(static_cast<grpc::StatusCode>(code), status.message());
}

}  // namespace tandem::server
