// API-key authentication of gRPC calls: `authorization: Bearer <key>` metadata checked against
// the configured keys (server.api_keys) on every call of the serving services.
#pragma once

#include <string>
#include <vector>

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

namespace tandem::server {

// OK when `keys` is empty (authentication off) or the call's `authorization` metadata is
// "Bearer <k>" for one of `keys` (compared in constant time per key). UNAUTHENTICATED otherwise,
// saying whether the header was missing or the key wrong (never echoing the key). Any thread.
// grpc.health.v1 and reflection are not checked: Kubernetes gRPC probes cannot send metadata,
// and neither reveals anything beyond the schema and the serving state.
grpc::Status check_api_key(const std::vector<std::string>& keys,
                           const grpc::ServerContextBase& context);

}  // namespace tandem::server
