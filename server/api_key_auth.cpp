// Bearer-token check of one call's metadata.
#include "server/api_key_auth.h"

#include <string_view>

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

}  // namespace

grpc::Status check_api_key(const std::vector<std::string>& keys,
                           const grpc::ServerContextBase& context) {
  if (keys.empty()) return grpc::Status::OK;
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
