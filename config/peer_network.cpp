// CIDR parsing and matching over the 128-bit (IPv4-mapped) form.
#include "config/peer_network.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace tandem::config {
namespace {

// The prefix's bit mask for byte `i` of the 128-bit form.
uint8_t mask_byte(int prefix_bits, size_t i) {
  const int bits = prefix_bits - static_cast<int>(i) * 8;
  if (bits >= 8) return 0xff;
  if (bits <= 0) return 0;
  return static_cast<uint8_t>(0xff << (8 - bits));
}

}  // namespace

std::optional<IpAddress> parse_ip_address(std::string_view text) {
  if (text.empty() || text.size() > 64) return std::nullopt;
  const std::string s(text);
  IpAddress a;
  in_addr v4{};
  if (::inet_pton(AF_INET, s.c_str(), &v4) == 1) {
    a.bytes[10] = 0xff;
    a.bytes[11] = 0xff;
    std::memcpy(a.bytes.data() + 12, &v4, 4);
    return a;
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, s.c_str(), &v6) == 1) {
    std::memcpy(a.bytes.data(), &v6, 16);
    return a;
  }
  return std::nullopt;
}

bool PeerNetwork::contains(const IpAddress& address) const {
  for (size_t i = 0; i < 16; ++i) {
    if ((address.bytes[i] & mask_byte(prefix_bits, i)) != base.bytes[i]) return false;
  }
  return true;
}

Result<PeerNetwork> parse_peer_network(std::string_view text) {
  const size_t slash = text.find('/');
  const std::string_view address_text = text.substr(0, slash);
  const std::optional<IpAddress> address = parse_ip_address(address_text);
  const std::string quoted = "'" + std::string(text) + "'";
  if (!address.has_value()) {
    return invalid_argument_error(quoted + " is not an IPv4 or IPv6 address or network");
  }
  const bool v4 = address_text.find(':') == std::string_view::npos;
  const int max_bits = v4 ? 32 : 128;
  int bits = max_bits;
  if (slash != std::string_view::npos) {
    const std::string_view digits = text.substr(slash + 1);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), bits);
    if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() || bits < 0 ||
        bits > max_bits) {
      return invalid_argument_error(quoted + ": the prefix length must be 0-" +
                                    std::to_string(max_bits));
    }
  }
  PeerNetwork network;
  network.prefix_bits = v4 ? 96 + bits : bits;
  for (size_t i = 0; i < 16; ++i) {
    network.base.bytes[i] =
        static_cast<uint8_t>(address->bytes[i] & mask_byte(network.prefix_bits, i));
  }
  if (network.base.bytes != address->bytes) {
    return invalid_argument_error(quoted + " has bits set past its /" + std::to_string(bits) +
                                  " prefix; write the network's first address");
  }
  return network;
}

}  // namespace tandem::config
