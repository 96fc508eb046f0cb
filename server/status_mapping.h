// The one place where an engine Status becomes a gRPC status.
#pragma once

#include <grpcpp/support/status.h>

#include "base/status.h"

namespace tandem::server {

// Same code (the enums share their numbering), same message.
grpc::Status to_grpc_status(const Status& status);

}  // namespace tandem::server
