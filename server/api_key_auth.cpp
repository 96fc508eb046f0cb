// Bearer-token check of one call's metadata.
#include "server/api_key_auth.h"

#include <string_view>

#include "base/check.h"

namespace tandem::server {
namespace {

constexpr std::string_view kBearer = "Bearer ";

// Compares without an early exit on the first differing byte, so the time taken does not tell
// how much of a key was right (the length may leak; keys have a minimum length).
bool equal_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

CallAuthPolicy auth_policy(const config::ServerConfig& server) {
  CallAuthPolicy policy;
  policy.keys = server.api_keys;
  for (const std::string& peer : server.trusted_peers) {
    Result<config::PeerNetwork> network = config::parse_peer_network(peer);
    TANDEM_CHECK_MSG(network.ok(), "server.trusted_peers was not validated");
    policy.trusted_peers.push_back(network.value());
  }
  return policy;
}

std::optional<config::IpAddress> grpc_peer_address(std::string_view peer) {
  constexpr size_t kMaxPeer = 128;
  if (peer.size() > kMaxPeer) return std::nullopt;
  std::string text;  // percent-decoded (newer gRPC versions escape the brackets and colons)
  for (size_t i = 0; i < peer.size(); ++i) {
    if (peer[i] == '%' && i + 2 < peer.size() && hex_value(peer[i + 1]) >= 0 &&
        hex_value(peer[i + 2]) >= 0) {
      text += static_cast<char>(hex_value(peer[i + 1]) * 16 + hex_value(peer[i + 2]));
      i += 2;
    } else {
      text += peer[i];
    }
  }
  const std::string_view t(text);
  if (t.substr(0, 5) == "ipv4:") {
    const std::string_view rest = t.substr(5);
    const size_t colon = rest.rfind(':');
    return config::parse_ip_address(rest.substr(0, colon));
  }
  if (t.substr(0, 6) == "ipv6:[") {
    const std::string_view rest = t.substr(6);
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    return config::parse_ip_address(rest.substr(0, close));
  }
  return std::nullopt;
}

grpc::Status check_api_key(const CallAuthPolicy& policy, const grpc::ServerContextBase& context) {
  const std::vector<std::string>& keys = policy.keys;
  if (keys.empty()) return grpc::Status::OK;
  if (!policy.trusted_peers.empty()) {
    const std::optional<config::IpAddress> peer = grpc_peer_address(context.peer());
    if (peer.has_value()) {
      for (const config::PeerNetwork& network : policy.trusted_peers) {
        if (network.contains(*peer)) return grpc::Status::OK;
      }
    }
  }
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "missing 'authorization: Bearer <key>' metadata; this server requires "
                        "an API key");
  }
  const std::string_view value(it->second.data(), it->second.size());
  if (value.substr(0, kBearer.size()) != kBearer) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "the 'authorization' metadata must be 'Bearer <key>'");
  }
  const std::string_view presented = value.substr(kBearer.size());
  bool match = false;
  for (const std::string& key : keys) match |= equal_constant_time(presented, key);
  if (!match) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "invalid API key");
  return grpc::Status::OK;
}

}  // namespace tandem::server
