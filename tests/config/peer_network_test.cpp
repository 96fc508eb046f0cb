// Tests of CIDR parsing and matching (server.trusted_peers).
#include "config/peer_network.h"

#include <catch2/catch.hpp>

namespace tandem::config {
namespace {

bool in(std::string_view network, std::string_view address) {
  const Result<PeerNetwork> n = parse_peer_network(network);
  REQUIRE(n.ok());
  const std::optional<IpAddress> a = parse_ip_address(address);
  REQUIRE(a.has_value());
  return n->contains(*a);
}

TEST_CASE("peer networks contain exactly their addresses", "[config]") {
  CHECK(in("127.0.0.1", "127.0.0.1"));
  CHECK_FALSE(in("127.0.0.1", "127.0.0.2"));
  CHECK(in("10.0.0.0/8", "10.255.3.4"));
  CHECK_FALSE(in("10.0.0.0/8", "11.0.0.0"));
  CHECK(in("192.168.4.0/22", "192.168.7.255"));
  CHECK_FALSE(in("192.168.4.0/22", "192.168.8.0"));
  CHECK(in("0.0.0.0/0", "8.8.8.8"));
  CHECK_FALSE(in("0.0.0.0/0", "::1"));  // /0 of IPv4 is every IPv4 address, no IPv6 one
  CHECK(in("::1", "::1"));
  CHECK_FALSE(in("::1", "::2"));
  CHECK(in("fd00::/8", "fdab:1::7"));
  CHECK(in("::/0", "8.8.8.8"));  // the IPv4-mapped form is an IPv6 address too
  // An IPv4 client of a dual-stack listener is reported as ::ffff:a.b.c.d.
  CHECK(in("127.0.0.0/8", "::ffff:127.0.0.9"));
}

TEST_CASE("malformed peer networks are refused with the text", "[config]") {
  for (const char* bad : {"", "localhost", "1.2.3", "1.2.3.4/", "1.2.3.4/33", "::1/129",
                          "1.2.3.4/-1", "1.2.3.4/8x", "[::1]", "1.2.3.4:80"}) {
    INFO(bad);
    const Status st = parse_peer_network(bad).status();
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(st.message(), Catch::Contains("'" + std::string(bad) + "'"));
  }
  CHECK_THAT(parse_peer_network("10.1.0.0/8").status().message(),
             Catch::Contains("bits set past its /8 prefix"));
  CHECK_FALSE(parse_ip_address("1.2.3.4/32").has_value());
}

}  // namespace
}  // namespace tandem::config
