// IP networks in CIDR notation ("127.0.0.1/32", "10.0.0.0/8", "::1/128", "fd00::/8") and the
// addresses they contain: server.trusted_peers, the peers whose calls need no API key.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace tandem::config {

// An IPv4 or IPv6 address; IPv4 is kept as its IPv4-mapped IPv6 form (::ffff:a.b.c.d), so that
// an IPv4 client of a dual-stack listener matches an IPv4 network.
struct IpAddress {
  std::array<uint8_t, 16> bytes{};
};

// "1.2.3.4", "::1", "::ffff:1.2.3.4" (no brackets, no port, no zone); nullopt otherwise.
std::optional<IpAddress> parse_ip_address(std::string_view text);

struct PeerNetwork {
  IpAddress base;       // with the bits past the prefix cleared
  int prefix_bits = 0;  // of the 128-bit form (an IPv4 /n is 96 + n)

  bool contains(const IpAddress& address) const;
};

// "<address>/<prefix>" or a bare address (a single host). INVALID_ARGUMENT naming the text for
// a malformed address, a prefix out of range (0-32 for IPv4, 0-128 for IPv6) or host bits set
// past the prefix ("10.0.0.1/8": write 10.0.0.0/8).
Result<PeerNetwork> parse_peer_network(std::string_view text);

}  // namespace tandem::config
