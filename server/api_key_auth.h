// API-key authentication of gRPC calls: `authorization: Bearer <key>` metadata checked against
// the configured keys (server.api_keys) on every call of the serving services.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "config/config.h"
#include "config/peer_network.h"

namespace tandem::server {

// Who may call: server.api_keys and server.trusted_peers.
struct CallAuthPolicy {
  std::vector<std::string> keys;                   // empty: no authentication
  std::vector<config::PeerNetwork> trusted_peers;  // calls from these need no key
};

// The policy of server.api_keys and server.trusted_peers (validated when the configuration
// loaded; a malformed network fails a TANDEM_CHECK).
CallAuthPolicy auth_policy(const config::ServerConfig& server);

// The IP address of a gRPC peer string ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000", also
// percent-encoded); nullopt for other transports ("unix:...") or a malformed string. Pure.
std::optional<config::IpAddress> grpc_peer_address(std::string_view peer);

// OK when `policy.keys` is empty (authentication off), when the call comes from one of
// `policy.trusted_peers` (its TCP peer address), or when its `authorization` metadata is
// "Bearer <k>" for one of the keys (compared in constant time per key). UNAUTHENTICATED otherwise,
// saying whether the header was missing or the key wrong (never echoing the key). Any thread.
// grpc.health.v1 and reflection are not checked: Kubernetes gRPC probes cannot send metadata,
// and neither reveals anything beyond the schema and the serving state.
grpc::Status check_api_key(const CallAuthPolicy& policy, const grpc::ServerContextBase& context);

}  // namespace tandem::server
